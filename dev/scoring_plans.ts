// How a pass would batch a rollout's sequences on the bundled model's household turns,
// two ways: whole sequences, and sharedPrefixMicroBatches (prefixes run once where that
// pays, scoring/shared_prefix.ts). For each, micro-batches, those after prefixes, the
// prefixes they run, tokens run (prefixes and rows padded) and the cost model's total;
// for the policy's sequences (the old log-probs', the reference's and the update's
// passes) and the teacher's. Counts only: no GPU time is measured, so it runs anywhere;
// `--dump` keeps the sequences and `--load` reads them back instead of running the
// rollout (minutes on the software GPU).
//
//   bun dev/scoring_plans.ts [--tasks 4] [--runs 8] [--turns 20] [--budget 32768] [--dump F | --load F]

import fs from 'node:fs';
import { parseArgs } from 'node:util';
import { householdRollout } from './household_rollout.ts';
import { initRuntime } from '../src/gpu/runtime.ts';
import { turnSequences, type TurnSequence } from '../src/rollout/turn_sequences.ts';
import { kernelPolicy } from '../src/gpu/kernel_policy.ts';
import { teacherSequences } from '../src/trainer/teacher.ts';
import { sharedPrefixMicroBatches, splitMicroBatches, type MicroBatch } from '../src/trainer/update.ts';

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

function summary(batches: MicroBatch[]) {
  const run = batches.reduce((n, mb) => n + (mb.prefixes ? mb.prefixes.batch * mb.prefixes.seq : 0) + mb.packed.batch * mb.packed.seq, 0);
  const prefixed = batches.filter((mb) => mb.prefixes);
  return {
    microBatches: batches.length, prefixed: prefixed.length, prefixes: prefixed.reduce((n, mb) => n + mb.prefixes!.batch, 0),
    tokensRun: run, modelCost: run + batches.length * COSTS.batch,
  };
}

for (const [name, sequences] of Object.entries(await rolloutSequences())) {
  const lengths = sequences.map((q) => q.ids.length);
  console.log(JSON.stringify({
    sequences: name, count: sequences.length, tokens: lengths.reduce((a, b) => a + b, 0), shortest: Math.min(...lengths), longest: Math.max(...lengths),
    whole: summary(splitMicroBatches(sequences, sequences.map((_, i) => i), budget)),
    shared: summary(sharedPrefixMicroBatches(sequences, budget, { costs: COSTS }).batches),
  }));
}
process.exit(0);
