// TRL's GRPOTrainer beside the rl-iteration bench, in the same process's call: the peer
// script (../shared/bench/trl_grpo.py) runs as a child process after our iterations, and
// its summary line becomes a row with the ratio of our iteration to TRL's. TRL users
// generate with vLLM rather than Hugging Face's generate, which the script times as its
// own phase, so the row also gives TRL's iteration without its generation: what TRL
// with vLLM takes before vLLM's own decoding is added, the least that setup can take.

import { spawn } from 'node:child_process';
import { meanOf } from '../algos/token_stats.ts';

export interface TrlPeerOptions {
  /** The peer script (trl_grpo.py). */
  script: string;
  /** The Qwen tokenizer.json the script loads. */
  tokenizer: string;
  /** The script's --variant (default 'default': no reference model, TRL's default recipe). */
  variant?: string;
  /** Iterations the script runs; its first (compiling, warming up) is left out of its figure. */
  steps?: number;
  /** The Python to run it with (default python3). */
  python?: string;
}

/** The summary line trl_grpo.py prints last. */
export interface TrlSummary {
  peer: string;
  variant: string;
  s_per_iteration: number;
  step_times: number[];
  generate_s: number[];
  peak_allocated_gib: number;
  peak_reserved_gib: number;
}

/** The last line of `output` that is trl_grpo.py's summary; throws naming what is missing. */
export function parseTrlSummary(output: string): TrlSummary {
  const lines = output.split('\n').map((l) => l.trim()).filter((l) => l.startsWith('{') && l.includes('"s_per_iteration"'));
  if (!lines.length) throw new Error('TRL peer: its output has no summary line (a JSON object with s_per_iteration)');
  const s = JSON.parse(lines[lines.length - 1]) as Partial<TrlSummary>;
  for (const key of ['s_per_iteration', 'peak_allocated_gib', 'peak_reserved_gib'] as const) {
    if (typeof s[key] !== 'number') throw new Error(`TRL peer: its summary has no number ${key}`);
  }
  if (!Array.isArray(s.step_times) || !Array.isArray(s.generate_s)) throw new Error('TRL peer: its summary has no step_times or generate_s');
  return s as TrlSummary;
}

const round = (x: number) => +x.toFixed(2);

/**
 * The comparison row: TRL's seconds an iteration and its generation (both over the
 * iterations after the first, as its own figure is), ours over TRL's, and TRL's
 * iteration less its generation beside ours.
 */
export function trlPeerRow(ours: { step_s: number }, trl: TrlSummary): object {
  const steady = trl.generate_s.length > 1 ? trl.generate_s.slice(1) : trl.generate_s;
  const generate = steady.length ? meanOf(steady) : NaN;
  const withoutGeneration = trl.s_per_iteration - generate;
  return {
    kind: 'rl_iteration_peer', peer: trl.peer, variant: trl.variant,
    peer_s: round(trl.s_per_iteration), peer_generate_s: round(generate), peer_without_generate_s: round(withoutGeneration),
    peer_peak_allocated_gib: round(trl.peak_allocated_gib), peer_peak_reserved_gib: round(trl.peak_reserved_gib),
    ours_s: ours.step_s, ours_over_peer: round(ours.step_s / trl.s_per_iteration),
    // TRL with vLLM takes at least its iteration without Hugging Face generation.
    ours_over_peer_without_generate: round(ours.step_s / withoutGeneration),
  };
}

/** Runs the peer script to its end and returns its summary; its output goes to stderr as it runs. */
export async function runTrlPeer(o: TrlPeerOptions): Promise<TrlSummary> {
  const args = [o.script, '--tokenizer', o.tokenizer, '--variant', o.variant ?? 'default', '--steps', String(o.steps ?? 3)];
  const child = spawn(o.python ?? 'python3', args, { stdio: ['ignore', 'pipe', 'inherit'] });
  let out = '';
  child.stdout.on('data', (chunk: Buffer) => {
    out += chunk.toString();
    process.stderr.write(chunk);
  });
  const code = await new Promise<number | null>((resolve, reject) => {
    child.on('error', (e) => reject(new Error(`TRL peer: could not start ${o.python ?? 'python3'}: ${e.message}`)));
    child.on('close', resolve);
  });
  if (code !== 0) throw new Error(`TRL peer: ${o.python ?? 'python3'} ${args.join(' ')} exited with ${code}`);
  return parseTrlSummary(out);
}
