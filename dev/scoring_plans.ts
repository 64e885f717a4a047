// How a scoring pass would batch a rollout's sequences on the bundled model's household
// turns, three ways: whole sequences (the old log-probs' micro-batches), every group of
// shared prefixes the cut finds at a small per-group overhead (512 tokens, the rule
// before groups had to pay for their batches), and scoringMicroBatches (only groups
// that pay, scoring/shared_prefix.ts). For each, micro-batches, those after a prefix,
// tokens run (rows padded, a prefix once a micro-batch) and the cost model's total; for
// the policy's sequences (the reference's pass) and the teacher's. Counts only: no GPU
// time is measured, so it runs anywhere; `--dump` keeps the sequences and `--load`
// reads them back instead of running the rollout (minutes on the software GPU).
//
//   bun dev/scoring_plans.ts [--tasks 4] [--runs 8] [--turns 20] [--budget 32768] [--dump F | --load F]

import fs from 'node:fs';
import { parseArgs } from 'node:util';
import { householdRollout } from './household_rollout.ts';
import { initRuntime } from '../src/gpu/runtime.ts';
import { turnSequences, type TurnSequence } from '../src/rollout/turn_sequences.ts';
import { kernelPolicy } from '../src/gpu/kernel_policy.ts';
import { sharedPrefixGroups } from '../src/scoring/shared_prefix.ts';
import { teacherSequences } from '../src/trainer/teacher.ts';
import { scoringMicroBatches, splitMicroBatches, type MicroBatch } from '../src/trainer/update.ts';

const { values: args } = parseArgs({
  options: {
    tasks: { type: 'string', default: '4' },
    runs: { type: 'string', default: '8' },
    turns: { type: 'string', default: '20' },
    budget: { type: 'string', default: '32768' },
    dump: { type: 'string' },
    load: { type: 'string' },
  },
});
const budget = Number(args.budget);
/** The runtime's default costs (the software GPU's runtime is not needed to count). */
const COSTS = kernelPolicy().scoring;

async function rolloutSequences(): Promise<Record<string, TurnSequence[]>> {
  if (args.load) return JSON.parse(fs.readFileSync(args.load, 'utf8'));
  await initRuntime({});
  const { samples } = await householdRollout({ tasks: Number(args.tasks), runs: Number(args.runs), turns: Number(args.turns) });
  const out = { policy: turnSequences(samples, { merge: true }), teacher: teacherSequences(samples, true) };
  if (args.dump) fs.writeFileSync(args.dump, JSON.stringify(out, (_, v) => (ArrayBuffer.isView(v) ? Array.from(v as Int32Array) : v)));
  return out;
}

function before(sequences: readonly TurnSequence[]): MicroBatch[] {
  const scored = sequences.map((_, i) => i).filter((i) => sequences[i].responseTokens > 0);
  const limits = sequences.map((q) => (q.turns.length ? q.turns[0].start - 1 : 0));
  const { groups, alone } = sharedPrefixGroups(sequences.map((q) => q.ids), scored, limits, 512);
  return [...groups.flatMap((g) => splitMicroBatches(sequences, g.members, budget, g.prefix)), ...splitMicroBatches(sequences, alone, budget)];
}

function summary(batches: MicroBatch[]) {
  const run = batches.reduce((n, mb) => n + (mb.prefix?.length ?? 0) + mb.packed.batch * mb.packed.seq, 0);
  const prefixed = batches.filter((mb) => mb.prefix);
  const cost = run + batches.length * COSTS.batch + prefixed.reduce((n, mb) => n + COSTS.prefixPass + mb.sequences.length * COSTS.row, 0);
  return { microBatches: batches.length, prefixed: prefixed.length, tokensRun: run, modelCost: cost };
}

for (const [name, sequences] of Object.entries(await rolloutSequences())) {
  const lengths = sequences.map((q) => q.ids.length);
  console.log(JSON.stringify({
    sequences: name, count: sequences.length, tokens: lengths.reduce((a, b) => a + b, 0), shortest: Math.min(...lengths), longest: Math.max(...lengths),
    whole: summary(splitMicroBatches(sequences, sequences.map((_, i) => i), budget)),
    before: summary(before(sequences)),
    now: summary(scoringMicroBatches(sequences, budget, COSTS).batches),
  }));
}
process.exit(0);
