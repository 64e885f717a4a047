// Environment variables the drivers under WebGPU read, set before an adapter is asked
// for. Mesa's EGL needs EGL_PLATFORM=surfaceless to open llvmpipe without a display.
// Mesa's Vulkan device-select layer asks libwayland for a display whenever Vulkan
// starts, and libwayland prints "error: XDG_RUNTIME_DIR is invalid or not set in the
// environment." for each Vulkan instance when the variable is missing or not an
// absolute path (servers, containers, sudo); a private directory, made as the XDG base
// directory spec asks (owned by us, mode 0700), keeps it quiet.

import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { platform, processEnv, setProcessEnv } from './host.ts';

/** Why `dir` cannot serve as XDG_RUNTIME_DIR, or null when it can. */
export function runtimeDirProblem(dir: string | undefined): string | null {
  if (!dir) return 'not set';
  if (!path.isAbsolute(dir)) return `${dir} is not an absolute path`;
  let st: fs.Stats;
  try {
    st = fs.statSync(dir);
  } catch {
    return `${dir} does not exist`;
  }
  if (!st.isDirectory()) return `${dir} is not a directory`;
  try {
    fs.accessSync(dir, fs.constants.R_OK | fs.constants.W_OK | fs.constants.X_OK);
  } catch {
    return `${dir} is not ours to write`;
  }
  return null;
}

const uid = (): number | null => (typeof process.getuid === 'function' ? process.getuid() : null);

/** A directory only we can use: `root`/wgt-runtime-<uid>, or a fresh one when that name is taken by someone else. */
export function privateRuntimeDir(root: string = os.tmpdir()): string {
  const dir = path.join(root, `wgt-runtime-${uid() ?? 'user'}`);
  try {
    fs.mkdirSync(dir, { mode: 0o700 });
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
  }
  const st = fs.lstatSync(dir);
  const mine = st.isDirectory() && !st.isSymbolicLink() && (uid() === null || st.uid === uid()) && (st.mode & 0o777) === 0o700;
  if (mine) return dir;
  const fresh = fs.mkdtempSync(path.join(root, 'wgt-runtime-'));
  fs.chmodSync(fresh, 0o700);
  return fresh;
}

/** Sets XDG_RUNTIME_DIR to a private directory when it is unusable (Linux only). */
export async function ensureRuntimeDir(): Promise<void> {
  if (platform() !== 'linux' || runtimeDirProblem(processEnv().XDG_RUNTIME_DIR) === null) return;
  await setProcessEnv('XDG_RUNTIME_DIR', privateRuntimeDir());
}

/** Sets `key` unless the user did. */
export async function setDefaultEnv(key: string, value: string): Promise<void> {
  if (processEnv()[key] === undefined) await setProcessEnv(key, value);
}
