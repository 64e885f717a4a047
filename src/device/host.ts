// What the JavaScript runtime and the OS under it offer the device layer: which runtime
// this is, its environment, and (under Bun on Linux) a few libc calls through FFI for
// what the runtime's own APIs cannot do to the C side of the process.

export type JsRuntime = 'deno' | 'bun' | 'node' | 'browser';

export function detectRuntime(): JsRuntime {
  const g = globalThis as Record<string, unknown>;
  if (g.Deno) return 'deno';
  if (g.Bun) return 'bun';
  if (g.process) return 'node';
  return 'browser';
}

export function processEnv(): Record<string, string | undefined> {
  const p = (globalThis as { process?: { env: Record<string, string | undefined> } }).process;
  return p?.env ?? {};
}

export const platform = (): string | undefined => (globalThis as { process?: { platform?: string } }).process?.platform;

export interface Libc {
  setenv(key: Uint8Array, value: Uint8Array, overwrite: number): number;
  dup(fd: number): number;
  dup2(from: number, to: number): number;
  close(fd: number): number;
}

let libc: Promise<Libc | null> | null = null;

/** glibc under Bun on Linux; null elsewhere or where it cannot be opened (musl). */
export function bunLibc(): Promise<Libc | null> {
  libc ??= (async () => {
    if (detectRuntime() !== 'bun' || platform() !== 'linux') return null;
    type Ffi = { dlopen(lib: string, syms: Record<string, { args: string[]; returns: string }>): { symbols: Libc } };
    try {
      // Spelled so that Node and Deno never try to resolve the module.
      const ffi = (await import(['bun', 'ffi'].join(':'))) as Ffi;
      return ffi.dlopen('libc.so.6', {
        setenv: { args: ['ptr', 'ptr', 'i32'], returns: 'i32' },
        dup: { args: ['i32'], returns: 'i32' },
        dup2: { args: ['i32', 'i32'], returns: 'i32' },
        close: { args: ['i32'], returns: 'i32' },
      }).symbols;
    } catch {
      return null;
    }
  })();
  return libc;
}

/**
 * Sets `key` in the C environment, which Mesa and the Vulkan loader read. Node and Deno
 * write process.env through to it; Bun keeps a copy, so there libc's setenv is called too.
 */
export async function setProcessEnv(key: string, value: string): Promise<void> {
  processEnv()[key] = value;
  const c = await bunLibc();
  const cstr = (s: string) => new TextEncoder().encode(`${s}\0`);
  c?.setenv(cstr(key), cstr(value), 1);
}
