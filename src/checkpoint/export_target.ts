// Where `export --out` may write. The export replaces its folder whole, so a folder
// that holds anything it did not write would be lost: such a folder is refused unless
// the user says to replace it, and the folders whose loss no flag can excuse (the
// model being exported, a folder above it, the working directory or one above that)
// are refused always. An export leaves EXPORT_RECORD in its folder, listing the files
// it wrote, which is how a later export recognises a folder it may replace without
// asking (and a file added there since, which it may not).

import { storage } from '../storage/storage.ts';
import * as path from '../storage/paths.ts';
import { writeFileAtomic } from '../util/atomic_file.ts';
import type { ModelSource } from './model_source.ts';

/** In an exported folder: what was exported, so a later export knows the folder for its own. */
export const EXPORT_RECORD = '.wgt-export.json';

/** Whether `inner` is `outer` or lies under it. */
function within(inner: string, outer: string): boolean {
  const rel = path.relative(outer, inner);
  return rel === '' || (!rel.startsWith('..') && !path.isAbsolute(rel));
}

/** The folders the export reads from. */
function sourceDirs(source: ModelSource<string | null>): string[] {
  const w = source.weights;
  const weights = w.kind === 'full' ? [w.dir] : [w.adapterDir, w.basePath];
  return [source.input, source.checkpoint, source.tokenizerDir, ...weights].filter((d): d is string => d !== null).map((d) => path.resolve(d));
}

/** Throws, saying why and what to do, unless `export` may replace `out`; `overwrite` lets it replace a folder it did not write. */
export function checkExportTarget(source: ModelSource<string | null>, out: string, opts: { overwrite: boolean; cwd?: string }): void {
  const target = path.resolve(out);
  const where = `--out ${out}`;
  for (const dir of sourceDirs(source)) {
    if (target === dir) throw new Error(`${where}: is the model exported; write the export to another folder`);
    if (within(dir, target)) throw new Error(`${where}: holds the model exported (${dir}); write the export to another folder`);
  }
  const cwd = path.resolve(opts.cwd ?? '.');
  if (within(cwd, target)) throw new Error(`${where}: ${target === cwd ? 'is' : 'holds'} the working directory; write the export to a folder of its own`);
  if (!storage().exists(target)) return;
  if (!storage().stat(target)?.isDirectory) throw new Error(`${where}: is a file, not a folder`);
  const written = new Set([EXPORT_RECORD, ...recordedFiles(target)]);
  const others = storage().list(target).filter((e) => !written.has(e)).sort();
  if (others.length === 0 || opts.overwrite) return;
  const shown = others.length > 5 ? `${others.slice(0, 5).join(', ')} and ${others.length - 5} more` : others.join(', ');
  throw new Error(`${where}: holds files an export did not write (${shown}); choose an empty or new folder, or pass --overwrite to replace it`);
}

/** The files an earlier export recorded writing in `dir` (none where it has no readable record). */
function recordedFiles(dir: string): string[] {
  try {
    const files = (JSON.parse(storage().readText(path.join(dir, EXPORT_RECORD))) as { files?: unknown }).files;
    return Array.isArray(files) ? files.filter((f): f is string => typeof f === 'string') : [];
  } catch {
    return [];
  }
}

/** Marks `out`, just written by an export of `source`, with what it holds. */
export function recordExport(out: string, source: ModelSource<string | null>, what: string): void {
  const files = storage().list(out).filter((f) => f !== EXPORT_RECORD).sort();
  const record = { exported: source.input, checkpoint: source.checkpoint, what, files, at: new Date().toISOString() };
  writeFileAtomic(path.join(out, EXPORT_RECORD), JSON.stringify(record, null, 2) + '\n');
}
