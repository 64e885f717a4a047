// Our comparison beside the paper's (paper_reference.ts): per method the paper's
// success for each of its models and ours, each with its rank in its own column, and
// sentences that say pair by pair where our order agrees with the paper's and where it
// does not. Our pairs carry their paired difference (paired_difference.ts), so a
// reversal the validation panel cannot tell from none reads as such.

import type { ArchivedRun } from './archive.ts';
import { pairedDifference, separates, type PairedDifference } from './paired_difference.ts';
import { PAPER_SOURCES, type PaperReference, type PaperSourceId, type PaperValue } from './paper_reference.ts';
import { orderAgreement, ranks, type RankedPair } from './rank_order.ts';
import { count, list, points } from './words.ts';

/** The final validation success of each run, the last validation it logged. */
function finalSuccess(run: ArchivedRun): number | null {
  const vals = run.rows.filter((r) => typeof r['val/success'] === 'number');
  return vals.length ? (vals[vals.length - 1]['val/success'] as number) : null;
}

export interface OurValue {
  /** Mean over the archived seeds of the final validation success, a fraction. */
  mean: number;
  seeds: number;
}

export interface PaperRow {
  method: string;
  /** Per paper column: its value and rank, null where the paper gives none. */
  paper: ({ value: PaperValue; rank: number } | null)[];
  ours: { value: OurValue; rank: number } | null;
}

/** The methods of the table: the reference's, then any other the archive holds. */
export function paperMethods(reference: PaperReference, runs: readonly ArchivedRun[]): string[] {
  const extra = [...new Set(runs.map((r) => r.meta.method))].filter((m) => !reference.methods.includes(m)).sort();
  return [...reference.methods, ...extra];
}

/** Our final success per method over its archived seeds; methods without a validated run are absent. */
export function ourValues(runs: readonly ArchivedRun[]): Map<string, OurValue> {
  const out = new Map<string, OurValue>();
  for (const method of new Set(runs.map((r) => r.meta.method))) {
    const finals = runs.filter((r) => r.meta.method === method).map(finalSuccess).filter((v): v is number => v !== null);
    if (finals.length) out.set(method, { mean: finals.reduce((a, v) => a + v, 0) / finals.length, seeds: finals.length });
  }
  return out;
}

export function paperRows(reference: PaperReference, runs: readonly ArchivedRun[]): PaperRow[] {
  const methods = paperMethods(reference, runs);
  const ours = ourValues(runs);
  const ourRanks = ranks(new Map([...ours].map(([m, v]) => [m, v.mean])));
  const columnRanks = reference.columns.map((c) => ranks(new Map(Object.entries(c.values).map(([m, v]) => [m, v.value]))));
  return methods.map((method) => ({
    method,
    paper: reference.columns.map((c, i) => (Object.hasOwn(c.values, method) ? { value: c.values[method], rank: columnRanks[i].get(method)! } : null)),
    ours: ours.has(method) ? { value: ours.get(method)!, rank: ourRanks.get(method)! } : null,
  }));
}

const percent = (v: number) => (100 * v).toFixed(1);
const paperCell = (v: PaperValue) => `${v.value.toFixed(1)}${PAPER_SOURCES[v.source].mark}`;

export function renderPaperTable(reference: PaperReference, rows: readonly PaperRow[]): string {
  const head = ['method', ...reference.columns.flatMap((c) => [`paper, ${c.model}`, 'rank']), 'ours, final validation % (seeds)', 'rank'];
  const lines = rows.map((r) => [
    r.method,
    ...r.paper.flatMap((p) => (p ? [paperCell(p.value), String(p.rank)] : ['–', '–'])),
    ...(r.ours ? [`${percent(r.ours.value.mean)} (${r.ours.value.seeds})`, String(r.ours.rank)] : ['– (0)', '–']),
  ]);
  return [head, head.map(() => '---'), ...lines].map((c) => `| ${c.join(' | ')} |`).join('\n') + '\n';
}

/** Our paired difference of a pair, `above` minus `below`, computed once per pair. */
type PairDifferences = (pair: RankedPair) => PairedDifference | null;

function pairDifferences(runs: readonly ArchivedRun[]): PairDifferences {
  const memo = new Map<string, PairedDifference | null>();
  const of = (m: string) => runs.filter((r) => r.meta.method === m);
  return ({ above, below }) => {
    const key = `${above}\u0000${below}`;
    if (!memo.has(key)) memo.set(key, pairedDifference(of(above), of(below)));
    return memo.get(key)!;
  };
}

const pairText = (p: RankedPair) => `${p.above} > ${p.below}`;

/** The sentence on one paper column: which pairs keep their order in ours, which trade places, which tie. */
function columnSentence(model: string, paper: Map<string, number>, ours: Map<string, OurValue>, differences: PairDifferences): string {
  const both = [...paper.keys()].filter((m) => ours.has(m));
  if (both.length < 2) return `Against the paper's ${model} column: ${both.length ? `only ${both[0]} has` : 'no method has'} a value in both, so there is no order to compare.`;
  const agreement = orderAgreement(paper, new Map(both.map((m) => [m, ours.get(m)!.mean])));
  const pairs = agreement.same.length + agreement.swapped.length + agreement.tied.length;
  const parts = [`Against the paper's ${model} column (${count(both.length, 'method')} in both, ${count(pairs, 'pair')})`];
  const same = agreement.same;
  if (same.length) {
    const loose = same.filter((p) => { const d = differences(p); return d === null || !separates(d); });
    const told = loose.length ? `, all but ${list(loose.map(pairText))}` : ', every one';
    parts.push(`the same order in ${same.length}: ${list(same.map(pairText))} (our panel separates ${same.length - loose.length} of these${told}: a paired 95% interval that leaves out zero)`);
  } else parts.push('the same order in none');
  if (agreement.swapped.length) {
    parts.push(`swapped in ${agreement.swapped.length}: ${agreement.swapped.map((p) => {
      const d = differences(p);
      const paired = d
        ? `; paired difference ${points(d.mean)} points, 95% interval ${points(d.lo)} to ${points(d.hi)} over ${count(d.seeds, 'seed')} × ${count(d.tasks, 'task')}, which ${separates(d) ? 'leaves out' : 'holds'} zero`
        : '; no seed in common to pair';
      return `${pairText(p)} in the paper (${paper.get(p.above)!.toFixed(1)} against ${paper.get(p.below)!.toFixed(1)}) but not here (${percent(ours.get(p.above)!.mean)} against ${percent(ours.get(p.below)!.mean)}${paired})`;
    }).join('; ')}`);
  } else parts.push('swapped in none');
  if (agreement.tied.length) {
    const where = { reference: 'in the paper', other: 'here', both: 'in both' } as const;
    parts.push(`tied in ${agreement.tied.length}: ${list(agreement.tied.map((p) => `${p.above} and ${p.below} ${where[p.tiedIn]}`))}`);
  }
  return `${parts[0]}: ${parts.slice(1).join('; ')}.`;
}

/** The generated sentences under the table: one per paper column, then the methods not compared and the setting. */
export function orderSentences(reference: PaperReference, runs: readonly ArchivedRun[]): string[] {
  const ours = ourValues(runs);
  const differences = pairDifferences(runs);
  const sentences = reference.columns.map((c) => columnSentence(c.model, new Map(Object.entries(c.values).map(([m, v]) => [m, v.value])), ours, differences));
  const missing = paperMethods(reference, runs).filter((m) => !ours.has(m));
  if (missing.length) sentences.push(`Not in our order until their runs are archived: ${list(missing)}.`);
  return [...sentences, reference.setting];
}

/** The part of the generated block that sets the comparison beside the paper; `references` links the page of sources. */
export function paperSection(reference: PaperReference, runs: readonly ArchivedRun[], references: string): string {
  const used = new Set(reference.columns.flatMap((c) => Object.values(c.values).map((v) => v.source)));
  const sources = Object.entries(PAPER_SOURCES).filter(([id]) => used.has(id as PaperSourceId)).map(([, s]) => s);
  const marks = sources.filter((s) => s.mark);
  const main = sources.find((s) => !s.mark) ?? PAPER_SOURCES.sdar;
  return [
    `**Beside the paper.** ${reference.benchmark} success rate, percent, as ${main.cite} reports it${marks.map((s) => `; ${s.mark} as ${s.cite}`).join('')}. `
      + `Sources, and where in them each number is printed: ${references}. Ranks count only the methods with a value in their column; equal values share a rank.`,
    '',
    renderPaperTable(reference, paperRows(reference, runs)).trimEnd(),
    '',
    ...[...reference.notes, ...orderSentences(reference, runs)].flatMap((s) => [s, '']),
  ].join('\n').trimEnd();
}
