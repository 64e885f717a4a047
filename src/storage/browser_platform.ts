// The platform in a browser tab: files in memory, fetched from the page's origin and
// written through to the Origin Private File System (browser_storage.ts), POSIX paths
// from the origin's root, and the page as the process: its Stop button is Ctrl-C, its
// log the terminal. The browser build puts this module in platform.ts's place
// (src/cli/web.ts); the page (src/web/) sets it up before a run.

import { BrowserStorage } from './browser_storage.ts';
import { posixPaths } from './posix_paths.ts';
import type { HostProcess, Platform, TextSink } from './types.ts';

/** The page as the process that owns a run. */
export class PageProcess implements HostProcess {
  readonly pid = 1 + Math.floor(Math.random() * 2 ** 30);
  readonly hostname = globalThis.location?.hostname ?? 'browser';
  readonly command = globalThis.location?.href ?? '';
  readonly startedAt = performance.timeOrigin;
  readonly env: Readonly<Record<string, string | undefined>> = {};
  readonly tempDir = '/tmp';
  readonly homeDir = '/';
  private readonly interruptListeners = new Set<() => void>();
  private readonly writers = new Set<(text: string) => void>();
  readonly stdout: TextSink = { write: (text: string) => this.writers.forEach((w) => w(text)), isTTY: false };

  /** Calls `writer` with everything written to stdout (progress and log lines). */
  onOutput(writer: (text: string) => void): () => void {
    this.writers.add(writer);
    return () => void this.writers.delete(writer);
  }

  /** The page's Stop: the run finishes the iteration in hand and saves a checkpoint. */
  interrupt(): void {
    for (const listener of [...this.interruptListeners]) listener();
  }

  /** Only this page's own runs are known to be alive; a lock of another page's run (another tab) counts as left behind. */
  alive(pid: number): boolean {
    return pid === this.pid;
  }

  onInterrupt(listener: () => void): () => void {
    this.interruptListeners.add(listener);
    return () => void this.interruptListeners.delete(listener);
  }

  onExit(listener: () => void): () => void {
    globalThis.addEventListener?.('pagehide', listener);
    return () => globalThis.removeEventListener?.('pagehide', listener);
  }

  exit(code: number): never {
    throw new Error(`the run stopped at once (exit code ${code})`);
  }
}

export const pageProcess = new PageProcess();

export const browserStorage = new BrowserStorage();

export const platform: Platform = { storage: browserStorage, paths: posixPaths, process: pageProcess, shippedRoots: ['/'] };
