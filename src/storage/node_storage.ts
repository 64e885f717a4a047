// Storage on the local file system (Bun, Deno and Node through node:fs). A whole-file
// write goes under a temporary name beside the target (the same file system, so the
// rename is atomic), is synced, and is renamed into place; renames sync their folder,
// so a crash after one returns keeps it.

import * as fs from 'node:fs';
import * as path from 'node:path';
import type { AppendableFile, FileStat, ReadableFile, Storage, WritableFile } from './types.ts';

function writeFully(fd: number, bytes: Uint8Array, position: number): void {
  let done = 0;
  while (done < bytes.length) done += fs.writeSync(fd, bytes, done, bytes.length - done, position + done);
}

const encode = (data: string | Uint8Array) => (typeof data === 'string' ? new TextEncoder().encode(data) : data);

/** Makes renames in `dir` durable; not every platform can open a directory, and there it is skipped. */
function syncDir(dir: string): void {
  let fd: number;
  try {
    fd = fs.openSync(dir, 'r');
  } catch {
    return;
  }
  try {
    fs.fsyncSync(fd);
  } catch {
    // Some file systems refuse fsync on directories; the rename itself is still atomic.
  } finally {
    fs.closeSync(fd);
  }
}

export class NodeStorage implements Storage {
  readBytes(file: string): Uint8Array {
    return fs.readFileSync(file);
  }

  readText(file: string): string {
    return fs.readFileSync(file, 'utf8');
  }

  stat(p: string): FileStat | null {
    const s = fs.statSync(p, { throwIfNoEntry: false });
    return s ? { size: s.size, isDirectory: s.isDirectory(), mtimeMs: s.mtimeMs } : null;
  }

  realPath(p: string): string {
    return fs.realpathSync(p);
  }

  exists(p: string): boolean {
    return fs.existsSync(p);
  }

  list(dir: string): string[] {
    return fs.readdirSync(dir);
  }

  makeDir(dir: string): void {
    fs.mkdirSync(dir, { recursive: true });
  }

  writeAtomic(file: string, contents: string | Uint8Array): void {
    fs.mkdirSync(path.dirname(path.resolve(file)), { recursive: true });
    const temp = `${file}.tmp-${process.pid}-${Math.random().toString(36).slice(2, 10)}`;
    try {
      const fd = fs.openSync(temp, 'w');
      try {
        writeFully(fd, encode(contents), 0);
        fs.fsyncSync(fd);
      } finally {
        fs.closeSync(fd);
      }
      fs.renameSync(temp, file);
    } catch (e) {
      fs.rmSync(temp, { force: true });
      throw e;
    }
  }

  appendLines(file: string, lines: readonly string[]): void {
    fs.mkdirSync(path.dirname(path.resolve(file)), { recursive: true });
    fs.appendFileSync(file, lines.map((l) => `${l}\n`).join(''));
  }

  createExclusive(file: string, contents: string): boolean {
    let fd: number;
    try {
      fd = fs.openSync(file, 'wx');
    } catch (e) {
      if ((e as { code?: string }).code === 'EEXIST') return false;
      throw e;
    }
    try {
      writeFully(fd, encode(contents), 0);
    } finally {
      fs.closeSync(fd);
    }
    return true;
  }

  openRead(file: string): ReadableFile {
    const fd = fs.openSync(file, 'r');
    let size: number;
    try {
      size = fs.fstatSync(fd).size;
    } catch (e) {
      fs.closeSync(fd);
      throw e;
    }
    return {
      size,
      read: (into, position) => fs.readSync(fd, into, 0, into.length, position),
      close: () => fs.closeSync(fd),
    };
  }

  openWrite(file: string): WritableFile {
    const fd = fs.openSync(file, 'w');
    return {
      write: (bytes, position) => writeFully(fd, bytes, position),
      truncate: (size) => fs.ftruncateSync(fd, size),
      close: () => {
        try {
          fs.fsyncSync(fd);
        } finally {
          fs.closeSync(fd);
        }
      },
      discard: () => fs.closeSync(fd),
    };
  }

  openAppend(file: string): AppendableFile {
    fs.mkdirSync(path.dirname(path.resolve(file)), { recursive: true });
    const fd = fs.openSync(file, 'a');
    return {
      append: (data) => {
        const bytes = encode(data);
        let done = 0;
        while (done < bytes.length) done += fs.writeSync(fd, bytes, done, bytes.length - done);
      },
      close: () => {
        try {
          fs.fsyncSync(fd);
        } finally {
          fs.closeSync(fd);
        }
      },
    };
  }

  link(target: string, p: string): void {
    try {
      fs.symlinkSync(target, p);
    } catch {
      fs.copyFileSync(path.resolve(path.dirname(p), target), p);
    }
  }

  rename(from: string, to: string): void {
    // A directory's own entries (the files made in it) become durable before it moves.
    if (fs.statSync(from, { throwIfNoEntry: false })?.isDirectory()) syncDir(from);
    fs.renameSync(from, to);
    syncDir(path.dirname(path.resolve(to)));
  }

  remove(p: string): void {
    fs.rmSync(p, { recursive: true, force: true });
  }

  async flush(): Promise<void> {}
}
