// Storage in a browser tab. The trainer reads and writes synchronously between GPU
// waits, and a page's own file calls (fetch, the Origin Private File System) are
// asynchronous, so the files live in memory: what the run reads is fetched from the
// page's origin before it starts (the bundled model, tokenizer and skill cards served
// beside the page) or loaded from the OPFS (a run to resume), and what it writes is
// kept here and written through to the OPFS behind it. flush() resolves once every
// write so far is in the OPFS; a checkpoint awaits it before it counts as saved.
//
// Each file the OPFS gets is written whole through createWritable, which the browser
// swaps in only when closed: a file there is always a version the run wrote in full.

import { posixPaths } from './posix_paths.ts';
import type { AppendableFile, FileStat, ReadableFile, Storage, WritableFile } from './types.ts';

const { resolve, dirname, basename } = posixPaths;

function missing(path: string): Error {
  return Object.assign(new Error(`ENOENT: no such file or directory, '${path}'`), { code: 'ENOENT' });
}

const encode = (data: string | Uint8Array) => (typeof data === 'string' ? new TextEncoder().encode(data) : data);

/** A byte buffer that grows by doubling, for files written piece by piece. */
class Growing {
  private buf = new Uint8Array(1024);
  size = 0;

  write(bytes: Uint8Array, position: number): void {
    this.reserve(position + bytes.length);
    this.buf.set(bytes, position);
    this.size = Math.max(this.size, position + bytes.length);
  }

  truncate(size: number): void {
    this.reserve(size);
    this.buf.fill(0, Math.min(this.size, size), size);
    this.size = size;
  }

  bytes(): Uint8Array {
    return this.buf.subarray(0, this.size);
  }

  private reserve(n: number): void {
    if (n <= this.buf.length) return;
    const next = new Uint8Array(Math.max(n, this.buf.length * 2));
    next.set(this.buf.subarray(0, this.size));
    this.buf = next;
  }
}

async function opfsDir(root: FileSystemDirectoryHandle, path: string, create: boolean): Promise<FileSystemDirectoryHandle> {
  let dir = root;
  for (const part of path.split('/').filter(Boolean)) dir = await dir.getDirectoryHandle(part, { create });
  return dir;
}

export class BrowserStorage implements Storage {
  private readonly files = new Map<string, { data: Uint8Array; mtimeMs: number }>();
  private readonly dirs = new Set<string>(['/']);
  /** Files written since the last write-through, and paths removed since. */
  private dirty = new Set<string>();
  private removed = new Set<string>();
  private writing: Promise<void> = Promise.resolve();
  private timer: ReturnType<typeof setTimeout> | null = null;
  /** The OPFS folder writes go through to; until it is open (or where a browser has none), files live in memory alone. */
  private opfs: FileSystemDirectoryHandle | null = null;

  /** Opens the origin's private file system for writes to go through to; false where the browser offers none. */
  async openOpfs(): Promise<boolean> {
    this.opfs = (await navigator.storage?.getDirectory?.().catch(() => null)) ?? null;
    return this.opfs !== null;
  }

  /** Fetches files from `base` (the page's origin) into memory at the same paths; read-only copies, never written through. */
  async fetchFiles(paths: readonly string[], base: string | URL): Promise<void> {
    await Promise.all(paths.map(async (p) => {
      const res = await fetch(new URL(p.replace(/^\//, ''), base));
      if (!res.ok) throw new Error(`${p}: the page's server answered ${res.status}`);
      this.put(resolve(p), new Uint8Array(await res.arrayBuffer()));
    }));
  }

  /** Files the page carries with it (the shaders' text in its bundle), at the paths given; read-only like fetched ones. */
  provide(files: Readonly<Record<string, string | Uint8Array>>): void {
    for (const [p, data] of Object.entries(files)) this.put(resolve(p), encode(data));
  }

  /** Loads what the OPFS holds under `dir` into memory (a run to continue). */
  async loadSaved(dir: string): Promise<void> {
    if (!this.opfs) return;
    let handle: FileSystemDirectoryHandle;
    try {
      handle = await opfsDir(this.opfs, resolve(dir), false);
    } catch {
      return;
    }
    const walk = async (h: FileSystemDirectoryHandle, at: string): Promise<void> => {
      this.mark(at);
      for await (const [name, entry] of (h as unknown as { entries(): AsyncIterable<[string, FileSystemHandle]> }).entries()) {
        const p = `${at}/${name}`;
        if (entry.kind === 'directory') await walk(entry as FileSystemDirectoryHandle, p);
        else this.put(p, new Uint8Array(await (await (entry as FileSystemFileHandle).getFile()).arrayBuffer()));
      }
    };
    await walk(handle, resolve(dir));
  }

  /** Every file under `dir`, with its bytes, for a download of a run. */
  filesUnder(dir: string): { path: string; data: Uint8Array }[] {
    const root = resolve(dir);
    return [...this.files].filter(([p]) => p.startsWith(`${root}/`)).map(([path, f]) => ({ path, data: f.data })).sort((a, b) => a.path.localeCompare(b.path));
  }

  readBytes(file: string): Uint8Array {
    const f = this.files.get(resolve(file));
    if (!f) throw missing(file);
    return f.data;
  }

  readText(file: string): string {
    return new TextDecoder().decode(this.readBytes(file));
  }

  stat(path: string): FileStat | null {
    const p = resolve(path);
    const f = this.files.get(p);
    if (f) return { size: f.data.length, isDirectory: false, mtimeMs: f.mtimeMs };
    return this.dirs.has(p) ? { size: 0, isDirectory: true, mtimeMs: 0 } : null;
  }

  realPath(path: string): string {
    if (!this.stat(path)) throw missing(path);
    return resolve(path);
  }

  exists(path: string): boolean {
    return this.stat(path) !== null;
  }

  list(dir: string): string[] {
    const d = resolve(dir);
    if (!this.dirs.has(d)) throw missing(dir);
    const prefix = d === '/' ? '/' : `${d}/`;
    const names = new Set<string>();
    for (const p of [...this.files.keys(), ...this.dirs]) {
      if (p.startsWith(prefix) && p !== d) names.add(p.slice(prefix.length).split('/')[0]);
    }
    return [...names].sort();
  }

  makeDir(dir: string): void {
    this.mark(resolve(dir));
  }

  writeAtomic(file: string, contents: string | Uint8Array): void {
    this.write(resolve(file), encode(contents).slice());
  }

  appendLines(file: string, lines: readonly string[]): void {
    const p = resolve(file);
    const add = encode(lines.map((l) => `${l}\n`).join(''));
    const old = this.files.get(p)?.data ?? new Uint8Array(0);
    const next = new Uint8Array(old.length + add.length);
    next.set(old);
    next.set(add, old.length);
    this.write(p, next);
  }

  createExclusive(file: string, contents: string): boolean {
    if (this.exists(file)) return false;
    this.writeAtomic(file, contents);
    return true;
  }

  openRead(file: string): ReadableFile {
    const data = this.readBytes(file);
    return {
      size: data.length,
      read: (into, position) => {
        const n = Math.max(0, Math.min(into.length, data.length - position));
        into.set(data.subarray(position, position + n));
        return n;
      },
      close: () => {},
    };
  }

  openWrite(file: string): WritableFile {
    const p = resolve(file);
    if (!this.dirs.has(dirname(p))) throw missing(dirname(p));
    const buf = new Growing();
    this.write(p, new Uint8Array(0));
    return {
      write: (bytes, position) => buf.write(bytes, position),
      truncate: (size) => buf.truncate(size),
      close: () => this.write(p, buf.bytes().slice()),
      discard: () => {},
    };
  }

  openAppend(file: string): AppendableFile {
    const p = resolve(file);
    const buf = new Growing();
    const old = this.files.get(p)?.data;
    if (old) buf.write(old, 0);
    this.write(p, buf.bytes());
    return {
      append: (data) => {
        buf.write(encode(data), buf.size);
        this.write(p, buf.bytes());
      },
      close: () => this.write(p, buf.bytes().slice()),
    };
  }

  link(target: string, path: string): void {
    this.writeAtomic(path, this.readBytes(posixPaths.join(dirname(resolve(path)), target)));
  }

  rename(from: string, to: string): void {
    const a = resolve(from);
    const b = resolve(to);
    if (!this.exists(a)) throw missing(from);
    const f = this.files.get(a);
    if (f) {
      this.files.delete(a);
      this.forget(a);
      this.write(b, f.data);
      return;
    }
    this.remove(b);
    for (const [p, file] of [...this.files]) {
      if (!p.startsWith(`${a}/`)) continue;
      this.files.delete(p);
      this.write(b + p.slice(a.length), file.data);
    }
    for (const d of [...this.dirs]) {
      if (d !== a && !d.startsWith(`${a}/`)) continue;
      this.dirs.delete(d);
      this.mark(b + d.slice(a.length));
    }
    this.forget(a);
  }

  remove(path: string): void {
    const p = resolve(path);
    if (!this.exists(p)) return;
    for (const f of [...this.files.keys()]) if (f === p || f.startsWith(`${p}/`)) this.files.delete(f);
    for (const d of [...this.dirs]) if (d !== '/' && (d === p || d.startsWith(`${p}/`))) this.dirs.delete(d);
    this.forget(p);
  }

  flush(): Promise<void> {
    if (this.timer !== null) clearTimeout(this.timer);
    this.timer = null;
    // A write-through that failed is retried by this one, which reports its own outcome.
    this.writing = this.writing.catch(() => {}).then(() => this.writeThrough());
    return this.writing;
  }

  private put(p: string, data: Uint8Array): void {
    this.mark(dirname(p));
    this.files.set(p, { data, mtimeMs: Date.now() });
  }

  private write(p: string, data: Uint8Array): void {
    this.put(p, data);
    this.dirty.add(p);
    // Written through within a second even when nothing awaits a flush, so a closed tab loses little.
    this.timer ??= setTimeout(() => void this.flush().catch(() => {}), 1000);
  }

  /** A path that is gone from memory is removed from the OPFS too, at the next write-through. */
  private forget(p: string): void {
    this.removed.add(p);
    for (const d of [...this.dirty]) if (d === p || d.startsWith(`${p}/`)) this.dirty.delete(d);
    this.timer ??= setTimeout(() => void this.flush().catch(() => {}), 1000);
  }

  private mark(dir: string): void {
    for (let d = dir; !this.dirs.has(d); d = dirname(d)) this.dirs.add(d);
  }

  private async writeThrough(): Promise<void> {
    const root = this.opfs;
    const removed = [...this.removed];
    const dirty = [...this.dirty];
    this.removed = new Set();
    this.dirty = new Set();
    if (!root) return;
    try {
      for (const p of removed) {
        try {
          await (await opfsDir(root, dirname(p), false)).removeEntry(basename(p), { recursive: true });
        } catch (e) {
          if ((e as DOMException).name !== 'NotFoundError') throw e;
        }
      }
      for (const p of dirty) {
        const f = this.files.get(p);
        if (!f) continue;
        const handle = await (await opfsDir(root, dirname(p), true)).getFileHandle(basename(p), { create: true });
        const out = await handle.createWritable();
        await out.write(f.data as Uint8Array<ArrayBuffer>);
        await out.close();
      }
    } catch (e) {
      // What did not get through is tried again at the next write-through.
      for (const p of removed) this.removed.add(p);
      for (const p of dirty) this.dirty.add(p);
      throw e;
    }
  }
}
