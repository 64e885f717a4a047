import { defineCommand } from 'citty';
import { createReadStream, createWriteStream, existsSync } from 'node:fs';
import { createInterface } from 'node:readline';
import { loadModelSource, resolveModelSource } from '../checkpoint/model_source.ts';
import { hubModelDir } from '../hub/hub_model.ts';
import { scoreSequences } from '../scoring/score.ts';
import { destroyRuntime, initRuntime } from '../gpu/runtime.ts';
import { CliError, intArg } from './args.ts';
import { gpuArgs, gpuOptions } from './gpu_args.ts';

function parseLine(line: string, where: string, vocab: number): number[] {
  let v: unknown;
  try {
    v = JSON.parse(line);
  } catch (e) {
    throw new CliError(`${where}: not JSON (${(e as Error).message})`);
  }
  const ids = (v as { token_ids?: unknown })?.token_ids;
  if (!Array.isArray(ids) || ids.length < 2) throw new CliError(`${where}: expected {"token_ids": [...]} with at least 2 ids`);
  ids.forEach((id, i) => {
    if (!Number.isInteger(id) || id < 0 || id >= vocab) throw new CliError(`${where}: token_ids[${i}] = ${JSON.stringify(id)} is not a token id in [0, ${vocab})`);
  });
  return ids as number[];
}

export const scoreCommand = defineCommand({
  meta: { name: 'score', description: 'Per-token log-probs of token sequences under a model (JSONL in, JSONL out)' },
  args: {
    model: { type: 'string', description: 'model directory, training checkpoint (ckpt-N), run directory (its latest checkpoint) or Hub model id (owner/name)', required: true },
    input: { type: 'string', description: 'JSONL file, one {"token_ids": [...]} per line', required: true },
    output: { type: 'string', description: 'output JSONL (default: standard output)' },
    'batch-tokens': { type: 'string', description: 'tokens per forward batch', default: '8192' },
    ...gpuArgs,
  },
  async run({ args }) {
    const source = resolveModelSource(await hubModelDir(args.model), '--model', { tokenizer: 'optional' });
    if (!existsSync(args.input)) throw new CliError(`--input ${args.input}: no such file`);
    const budget = intArg('--batch-tokens', args['batch-tokens'], 2);
    await initRuntime(gpuOptions(args));
    const model = loadModelSource(source, '--model');
    const seqs: number[][] = [];
    let n = 0;
    for await (const line of createInterface({ input: createReadStream(args.input) })) {
      n++;
      if (line.trim()) seqs.push(parseLine(line, `${args.input}:${n}`, model.config.vocabSize));
    }
    const scores = await scoreSequences(model, seqs, { maxBatchTokens: budget });
    const out = args.output ? createWriteStream(args.output) : process.stdout;
    for (const s of scores) out.write(`${JSON.stringify({ token_logprobs: [null, ...Array.from(s)] })}\n`);
    if (args.output) await new Promise<void>((resolve) => (out as ReturnType<typeof createWriteStream>).end(resolve));
    destroyRuntime();
  },
});
