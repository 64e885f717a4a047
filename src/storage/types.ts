// What the program reads and writes outside itself, as one small set of interfaces with
// an implementation per platform: files (Storage), their paths, and the process that
// owns them. Under Bun, Deno and Node they are the local file system, node:path and this
// process (platform.ts); in a browser tab, the page's origin, the Origin Private File
// System and the page (browser_platform.ts).

export interface FileStat {
  size: number;
  isDirectory: boolean;
  /** Last modification, ms since the epoch. */
  mtimeMs: number;
}

/** A file opened for reads at any position. */
export interface ReadableFile {
  readonly size: number;
  /** Reads up to `into.length` bytes at `position`; the count read (0 at the end). */
  read(into: Uint8Array, position: number): number;
  close(): void;
}

/** A file opened for writes at any position (created, or emptied when it exists). */
export interface WritableFile {
  write(bytes: Uint8Array, position: number): void;
  /** Sets the length: cut, or extended with zeros. */
  truncate(size: number): void;
  /** Makes what was written durable, then closes. */
  close(): void;
  /** Closes without making anything durable (the file is about to be removed). */
  discard(): void;
}

/** A file opened to append to (created when missing). */
export interface AppendableFile {
  append(data: string | Uint8Array): void;
  /** Makes what was appended durable, then closes. */
  close(): void;
}

/**
 * Files by path. Every call is synchronous, as the code that reads and writes runs
 * between GPU waits; where the platform's own calls are asynchronous (a browser's),
 * the implementation keeps the files in memory and writes them through behind, and
 * flush() waits until they are durable.
 */
export interface Storage {
  /** The whole file; throws (code ENOENT) when it is missing. */
  readBytes(file: string): Uint8Array;
  readText(file: string): string;
  /** What is at `path`, or null when nothing is. */
  stat(path: string): FileStat | null;
  /** The absolute path with every symbolic link resolved; throws when nothing is there. */
  realPath(path: string): string;
  exists(path: string): boolean;
  /** The names in a directory (files and directories). */
  list(dir: string): string[];
  /** Makes a directory and its parents; one that exists is fine. */
  makeDir(dir: string): void;
  /** Writes a whole file (making its folder) so that no reader ever sees part of it: under a temporary name, synced, renamed into place. */
  writeAtomic(file: string, contents: string | Uint8Array): void;
  /** Appends lines (each ended by a newline), making the file and its folder when missing. */
  appendLines(file: string, lines: readonly string[]): void;
  /** Creates `file` with `contents` unless something is there already; false when it was. */
  createExclusive(file: string, contents: string): boolean;
  openRead(file: string): ReadableFile;
  openWrite(file: string): WritableFile;
  openAppend(file: string): AppendableFile;
  /** Makes `path` a symbolic link to `target` (relative to the link's folder), or a copy of it where links are refused. */
  link(target: string, path: string): void;
  /** Renames a file or directory (replacing a file at `to`), durably. */
  rename(from: string, to: string): void;
  /** Removes a file or a directory with everything in it; nothing there is fine. */
  remove(path: string): void;
  /** Resolves once everything written so far is durable. */
  flush(): Promise<void>;
}

/** node:path's functions, as the platform spells paths. */
export interface PathFunctions {
  readonly sep: string;
  join(...parts: string[]): string;
  resolve(...parts: string[]): string;
  relative(from: string, to: string): string;
  dirname(path: string): string;
  basename(path: string, suffix?: string): string;
  extname(path: string): string;
  normalize(path: string): string;
  isAbsolute(path: string): boolean;
  /** The file: URL of a path. */
  toFileUrl(path: string): URL;
}

/** Where text for a person goes (a terminal, a pipe, the page's log). */
export interface TextSink {
  write(text: string): unknown;
  isTTY?: boolean;
  columns?: number;
}

/** The process that owns what it writes: who holds a run's lock, what asks it to stop. */
export interface HostProcess {
  readonly pid: number;
  readonly hostname: string;
  /** The command line (or the page's address) that started it. */
  readonly command: string;
  /** When it started, ms since the epoch. */
  readonly startedAt: number;
  /** Its environment variables. */
  readonly env: Readonly<Record<string, string | undefined>>;
  /** The folder for temporary files every process of the machine shares. */
  readonly tempDir: string;
  /** The user's home folder. */
  readonly homeDir: string;
  /** Where progress and log lines go. */
  readonly stdout: TextSink;
  /** Whether process `pid` of this machine still runs. */
  alive(pid: number): boolean;
  /** Calls `listener` on each request to stop (Ctrl-C, the page's Stop); returns what removes it. */
  onInterrupt(listener: () => void): () => void;
  /** Calls `listener` when the process ends, however it ends; returns what removes it. */
  onExit(listener: () => void): () => void;
  /** Ends the process at once. */
  exit(code: number): never;
}

export interface Platform {
  storage: Storage;
  paths: PathFunctions;
  process: HostProcess;
  /** Folders that may hold the files this program ships with (shaders/, envs/<name>/skills/), nearest first. */
  shippedRoots: readonly string[];
}
