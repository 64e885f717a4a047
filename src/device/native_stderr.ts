// Captures what native code (Dawn, Mesa, the Vulkan loader) writes to the process's
// stderr while `fn` runs, by pointing file descriptor 2 at a private temporary file and
// back. JavaScript's own writes are not captured: Bun's stderr stream, once set up,
// keeps writing where stderr pointed then, so it is set up before the swap. Only Bun on Linux
// can swap descriptors (libc through FFI); elsewhere `fn` runs as is and nothing is
// captured, so native messages reach the terminal unfiltered.

import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { bunLibc } from './host.ts';

export interface Captured<T> {
  result: { ok: true; value: T } | { ok: false; error: unknown };
  /** What native code wrote to stderr meanwhile ('' when nothing could be captured). */
  text: string;
}

async function settle<T>(fn: () => Promise<T>): Promise<Captured<T>['result']> {
  try {
    return { ok: true, value: await fn() };
  } catch (error) {
    return { ok: false, error };
  }
}

export async function captureNativeStderr<T>(fn: () => Promise<T>): Promise<Captured<T>> {
  const c = await bunLibc();
  if (!c) return { result: await settle(fn), text: '' };
  void process.stderr.isTTY;
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'wgt-stderr-'));
  const file = path.join(dir, 'stderr');
  const fd = fs.openSync(file, 'w', 0o600);
  const saved = c.dup(2);
  if (saved < 0 || c.dup2(fd, 2) < 0) {
    if (saved >= 0) c.close(saved);
    fs.closeSync(fd);
    fs.rmSync(dir, { recursive: true, force: true });
    return { result: await settle(fn), text: '' };
  }
  let result: Captured<T>['result'];
  try {
    result = await settle(fn);
  } finally {
    c.dup2(saved, 2);
    c.close(saved);
    fs.closeSync(fd);
  }
  const text = fs.readFileSync(file, 'utf8');
  fs.rmSync(dir, { recursive: true, force: true });
  return { result, text };
}
