import * as fs from 'node:fs';
import * as path from 'node:path';
import { defineCommand } from 'citty';
import { readArchive } from '../compare/archive.ts';
import { renderResultsTable, repositoryPage, resultRows, writeResults } from '../compare/results.ts';
import { CliError } from './args.ts';

export const resultsCommand = defineCommand({
  meta: {
    name: 'results',
    description: 'Rebuild a method comparison\'s tables and curves from its archived runs (no GPU needed), e.g. ' +
      '`results docs/results/household` rewrites that environment\'s block of this repository\'s docs/RESULTS.md and its figure. ' +
      'Any other archive is printed, and written only into a page named with --page.',
  },
  args: {
    archive: { type: 'positional', required: true, description: 'the archive folder (written by `compare --results`), e.g. docs/results/<env>' },
    page: { type: 'string', description: "the page whose generated block is rewritten, its figure going to figures/ beside it (default: this repository's docs/RESULTS.md for its own docs/results/<env>; none for any other archive)" },
    'print-only': { type: 'boolean', description: 'print the table and write nothing' },
  },
  run({ args }) {
    const dir = args.archive;
    if (!fs.existsSync(dir) || !fs.statSync(dir).isDirectory()) throw new CliError(`${dir}: no such folder (the archive \`compare --results\` writes)`);
    const runs = readArchive(dir);
    if (!runs.length) throw new CliError(`${dir}: no archived runs (each run is a folder with run.json, metrics.jsonl, val_tasks.json)`);
    const env = path.basename(path.resolve(dir));
    const page = args['print-only'] ? null : args.page ?? repositoryPage(dir);
    console.log(renderResultsTable(resultRows(runs)));
    if (page === null) {
      if (!args['print-only']) console.log(`${runs.length} runs; wrote nothing: ${dir} is not this repository's docs/results/${env}, so its block goes only into a page named with --page FILE`);
      return;
    }
    if (!fs.existsSync(page)) throw new CliError(`--page ${page}: not found`);
    const { figure } = writeResults(env, runs, page, fs.readFileSync(page, 'utf8'));
    console.log(`${runs.length} runs; wrote the ${env} block of ${page} and ${path.join(path.dirname(page), figure)}`);
  },
});
