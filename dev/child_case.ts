// Running one benchmark case in a child process of its own, with a time limit, so that
// a case that brings the process down (a driver or Dawn crash) becomes a row and the
// sweep goes on. The child announces each phase it enters on stderr (`phase name`), so
// a crash row says how far it got.

import { spawn } from 'node:child_process';

export interface ChildResult {
  /** The last JSON line the child printed on stdout, if any. */
  row: object | null;
  code: number | null;
  signal: NodeJS.Signals | null;
  timedOut: boolean;
  stderr: string;
}

/**
 * The Dawn toggles a child starts with: WEBGPU_TOGGLES, else the device kit's, else the
 * ones that unlock f16 and tensor-core subgroup matrices on NVIDIA.
 */
export const childToggles = (process.env.WEBGPU_TOGGLES || process.env.GPU_KIT_DAWN_TOGGLES || 'allow_unsafe_apis,vulkan_enable_f16_on_nvidia')
  .split(',').map((t) => t.trim()).filter(Boolean);

/** Called in the child: marks the phase it is entering. */
export const phase = (name: string) => process.stderr.write(`phase ${name}\n`);

/** Runs `script` with `args` under this runtime, killing it after `timeoutS` seconds. */
export function runChild(script: string, args: string[], timeoutS: number): Promise<ChildResult> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [...process.execArgv, script, ...args], { stdio: ['ignore', 'pipe', 'pipe'], env: process.env });
    let stdout = '';
    let stderr = '';
    let timedOut = false;
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => {
      stderr += d;
      if (stderr.length > 200_000) stderr = stderr.slice(-100_000);
    });
    const timer = setTimeout(() => {
      timedOut = true;
      child.kill('SIGKILL');
    }, timeoutS * 1000);
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      const line = stdout.split('\n').reverse().find((l) => l.startsWith('{'));
      let row: object | null = null;
      try {
        row = line ? JSON.parse(line) : null;
      } catch {
        row = null;
      }
      resolve({ row, code, signal, timedOut, stderr });
    });
  });
}

/** The last phase the child reached. */
export const lastPhase = (r: ChildResult) => [...r.stderr.matchAll(/^phase (\S+)$/gm)].at(-1)?.[1];

/** A row for a child that died: what it ran, how it ended, the phase it reached and its stderr's tail. */
export function crashRow(kind: string, what: object, r: ChildResult): object {
  const tail = r.stderr.split('\n').filter((l) => !l.startsWith('phase ')).join('\n').slice(-2000);
  return { kind, crashed: true, ...what, code: r.code, signal: r.signal, ...(r.timedOut ? { timedOut: true } : {}), phase: lastPhase(r) ?? 'start', stderr: tail };
}
