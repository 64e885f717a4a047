// The CLI in a child process, for tests whose servers run in the test's own process
// and must keep answering while a command runs (spawnSync would block them).

import { spawn, type ChildProcess } from 'node:child_process';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';

export const ROOT = path.dirname(path.dirname(path.dirname(fileURLToPath(import.meta.url))));
export const MAIN = path.join(ROOT, 'src', 'cli', 'main.ts');

/** Runs `main.ts args` from the repository root on the software GPU; resolves with its exit code and stdout and stderr together. */
export function runCli(args: string[], env: NodeJS.ProcessEnv = {}): Promise<{ code: number | null; out: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [MAIN, ...args], { cwd: ROOT, env: { ...cliEnv(), ...env } });
    let text = '';
    child.stdout.on('data', (d) => (text += d));
    child.stderr.on('data', (d) => (text += d));
    child.on('close', (code) => resolve({ code, out: text }));
  });
}

/** The environment runCli gives a child: this process's, on the software GPU. */
export const cliEnv = (): NodeJS.ProcessEnv => ({ ...process.env, EGL_PLATFORM: 'surfaceless' });

/**
 * `main.ts serve ...args` in a process of its own. `url` resolves with the address it
 * prints once it listens (rejects, with what it printed, if it exits first); the child
 * is returned at once so a caller can stop it whatever happens.
 */
export function startServe(args: string[], env: NodeJS.ProcessEnv = cliEnv()): { child: ChildProcess; url: Promise<string>; output: () => string } {
  const child = spawn(process.execPath, [MAIN, 'serve', ...args], { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  child.stderr!.on('data', (d) => (err += d));
  const url = new Promise<string>((resolve, reject) => {
    child.stdout!.on('data', (d) => {
      out += d;
      const m = /serving .* at (http:\/\/\S+)/.exec(out);
      if (m) resolve(m[1]);
    });
    child.on('exit', (code) => reject(new Error(`serve exited with ${code}: ${out}${err}`)));
  });
  return { child, url, output: () => out };
}
