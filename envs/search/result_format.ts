// How a search's hits are shown to the model, exactly as each reference renders them:
// - search-r1 (generation.py): "Doc i(Title: <first line>) <rest>\n" per hit, the whole
//   stripped and wrapped as "\n\n<information>…</information>\n\n";
// - verl-agent (SDAR's search tool and environment): "Doc i: <contents stripped>\n" per
//   hit, wrapped as json.dumps({"result": …}) (ASCII escapes), inside
//   "\n<information>…</information>\n", which the environment strips.

import { splitDocument } from './jsonl.ts';
import { pyJsonString, pyStrip } from './python_text.ts';
import type { RetrievalHit } from './retriever.ts';

export const RESULT_FORMATS = ['search-r1', 'verl-agent'] as const;
export type ResultFormat = (typeof RESULT_FORMATS)[number];

export function formatInformation(hits: readonly RetrievalHit[], format: ResultFormat = 'search-r1'): string {
  if (format === 'verl-agent') {
    const passages = hits.map((h, i) => `Doc ${i + 1}: ${pyStrip(h.document.contents)}\n`).join('');
    return pyStrip(`\n<information>{"result": ${pyJsonString(passages)}}</information>\n`);
  }
  const passages = hits.map((h, i) => {
    const { title, text } = splitDocument(h.document.contents);
    return `Doc ${i + 1}(Title: ${title}) ${text}\n`;
  });
  return `\n\n<information>${pyStrip(passages.join(''))}</information>\n\n`;
}
