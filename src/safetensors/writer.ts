// Writing safetensors the way transformers' save_pretrained does: __metadata__
// {"format": "pt"} (transformers refuses files without it), headers padded with spaces
// to 8 bytes, one model.safetensors or, above shardBytes, model-0000i-of-0000n.safetensors
// plus model.safetensors.index.json ({metadata: {total_size}, weight_map}).
//
// The layout is fixed from the tensor specs before any data arrives, so headers go out
// first and each tensor is written at its offset as it comes: only one tensor is ever
// held in host memory. Files are written under temporary names and renamed into place
// by finish(), so an interrupted write never leaves a truncated file under a real name.

import * as path from '../storage/paths.ts';
import { storage, type WritableFile } from '../storage/storage.ts';
import { tempPath, writeFileAtomic } from '../util/atomic_file.ts';
import { SafetensorsError } from './errors.ts';
import { f32ToBf16, f32ToF16 } from '../util/half.ts';
import { INDEX_FILE, SINGLE_FILE } from './reader.ts';

export type StorageDType = 'F32' | 'F16' | 'BF16';

const STORAGE_BYTES: Record<StorageDType, number> = { F32: 4, F16: 2, BF16: 2 };

/** HF's default max_shard_size ("5GB"). */
export const DEFAULT_SHARD_BYTES = 5_000_000_000;

export interface TensorSpec {
  name: string;
  shape: readonly number[];
}

/** A named host tensor: [HF name, f32 data, shape]. */
export type TensorEntry = readonly [name: string, data: Float32Array, shape: readonly number[]];

export interface WriteOptions {
  dtype?: StorageDType;
  /** Start a new shard before a tensor that would take the current one past this many bytes. */
  shardBytes?: number;
  metadata?: Record<string, string>;
  /** Name of the file when everything fits one shard (default model.safetensors). */
  singleName?: string;
}

export interface WrittenCheckpoint {
  /** Final paths of the .safetensors files. */
  files: string[];
  /** Path of the index, or null for a single file. */
  index: string | null;
  totalSize: number;
}

interface Slot {
  shard: number;
  offset: number;
  bytes: number;
  shape: readonly number[];
  written: boolean;
}

interface Shard {
  final: string;
  temp: string;
  file: WritableFile | null;
}

function numel(shape: readonly number[]): number {
  let n = 1;
  for (const d of shape) n *= d;
  return n;
}

function headerBytes(entries: [string, unknown][], metadata: Record<string, string>): Uint8Array {
  const json = JSON.stringify(Object.fromEntries([['__metadata__', metadata], ...entries]));
  const raw = new TextEncoder().encode(json);
  const padded = Math.ceil(raw.length / 8) * 8;
  const out = new Uint8Array(8 + padded).fill(0x20, 8);
  new DataView(out.buffer).setBigUint64(0, BigInt(padded), true);
  out.set(raw, 8);
  return out;
}

/** Streams tensors into one or several safetensors files in `dir` (which must exist). */
export class SafetensorsWriter {
  private finished = false;

  private constructor(
    private readonly dir: string,
    private readonly dtype: StorageDType,
    private readonly slots: Map<string, Slot>,
    private readonly shards: Shard[],
    private readonly totalSize: number,
  ) {}

  /** Lays out `specs` (in this order) into shards and writes their headers. */
  static create(dir: string, specs: readonly TensorSpec[], opts: WriteOptions = {}): SafetensorsWriter {
    const dtype = opts.dtype ?? 'F32';
    const limit = opts.shardBytes ?? DEFAULT_SHARD_BYTES;
    const metadata = { format: 'pt', ...opts.metadata };
    const groups: TensorSpec[][] = [[]];
    let used = 0;
    let total = 0;
    const seen = new Set<string>();
    for (const spec of specs) {
      if (seen.has(spec.name)) throw new SafetensorsError(`safetensors writer: tensor "${spec.name}" listed twice`);
      seen.add(spec.name);
      if (!spec.shape.every((d) => Number.isSafeInteger(d) && d >= 0)) {
        throw new SafetensorsError(`safetensors writer: tensor "${spec.name}" has invalid shape [${spec.shape.join(', ')}]`);
      }
      const bytes = numel(spec.shape) * STORAGE_BYTES[dtype];
      if (used > 0 && used + bytes > limit) {
        groups.push([]);
        used = 0;
      }
      groups[groups.length - 1].push(spec);
      used += bytes;
      total += bytes;
    }
    const n = groups.length;
    const slots = new Map<string, Slot>();
    const shards: Shard[] = [];
    try {
      groups.forEach((group, s) => {
        const name = n === 1 ? (opts.singleName ?? SINGLE_FILE) : `model-${String(s + 1).padStart(5, '0')}-of-${String(n).padStart(5, '0')}.safetensors`;
        const final = path.join(dir, name);
        const shard: Shard = { final, temp: tempPath(final), file: null };
        shards.push(shard);
        let offset = 0;
        const entries: [string, unknown][] = [];
        for (const spec of group) {
          const bytes = numel(spec.shape) * STORAGE_BYTES[dtype];
          entries.push([spec.name, { dtype, shape: [...spec.shape], data_offsets: [offset, offset + bytes] }]);
          slots.set(spec.name, { shard: s, offset, bytes, shape: spec.shape, written: false });
          offset += bytes;
        }
        const header = headerBytes(entries, metadata);
        for (const slot of slots.values()) if (slot.shard === s) slot.offset += header.length;
        shard.file = storage().openWrite(shard.temp);
        shard.file.write(header, 0);
        if (offset > 0) shard.file.truncate(header.length + offset);
      });
    } catch (e) {
      for (const shard of shards) discard(shard);
      throw e;
    }
    return new SafetensorsWriter(dir, dtype, slots, shards, total);
  }

  /** Writes one tensor's data (any order; each spec exactly once). */
  write(name: string, data: Float32Array): void {
    const slot = this.slots.get(name);
    const file = (s: Slot) => path.basename(this.shards[s.shard].final);
    if (!slot) throw new SafetensorsError(`safetensors writer: tensor "${name}" is not in the layout`);
    if (this.finished) throw new SafetensorsError(`${file(slot)}: tensor "${name}": writer already finished`);
    if (slot.written) throw new SafetensorsError(`${file(slot)}: tensor "${name}" written twice`);
    if (data.length !== numel(slot.shape)) {
      throw new SafetensorsError(`${file(slot)}: tensor "${name}" has ${data.length} values for shape [${slot.shape.join(', ')}]`);
    }
    const encoded = this.dtype === 'F32' ? data : this.dtype === 'BF16' ? f32ToBf16(data) : f32ToF16(data);
    const out = this.shards[slot.shard].file;
    if (out === null) throw new SafetensorsError(`${file(slot)}: tensor "${name}": file is closed`);
    out.write(new Uint8Array(encoded.buffer, encoded.byteOffset, slot.bytes), slot.offset);
    slot.written = true;
  }

  /** Checks every tensor arrived, syncs, and renames the files (then the index) into place. */
  finish(): WrittenCheckpoint {
    const missing = [...this.slots].filter(([, s]) => !s.written).map(([n]) => n);
    if (missing.length > 0) {
      this.abort();
      throw new SafetensorsError(`safetensors writer: ${missing.length} tensor(s) never written, first "${missing[0]}"`);
    }
    for (const shard of this.shards) {
      if (shard.file === null) continue;
      shard.file.close();
      shard.file = null;
    }
    for (const shard of this.shards) storage().rename(shard.temp, shard.final);
    this.finished = true;
    let index: string | null = null;
    if (this.shards.length > 1) {
      const weightMap: Record<string, string> = {};
      for (const name of [...this.slots.keys()].sort()) weightMap[name] = path.basename(this.shards[this.slots.get(name)!.shard].final);
      index = path.join(this.dir, INDEX_FILE);
      writeFileAtomic(index, JSON.stringify({ metadata: { total_size: this.totalSize }, weight_map: weightMap }, null, 2) + '\n');
    }
    return { files: this.shards.map((s) => s.final), index, totalSize: this.totalSize };
  }

  /** Closes and deletes the temporary files. */
  abort(): void {
    if (this.finished) return;
    for (const shard of this.shards) discard(shard);
    this.finished = true;
  }
}

function discard(shard: Shard): void {
  shard.file?.discard();
  shard.file = null;
  storage().remove(shard.temp);
}

/**
 * Writes host tensors to the file `target`, or, when they exceed shardBytes, to
 * model-0000i-of-0000n.safetensors shards plus model.safetensors.index.json beside it.
 */
export function writeSafetensors(target: string, tensors: Iterable<TensorEntry>, opts: WriteOptions = {}): WrittenCheckpoint {
  const list = [...tensors];
  const specs = list.map(([name, , shape]) => ({ name, shape }));
  const writer = SafetensorsWriter.create(path.dirname(target), specs, { ...opts, singleName: path.basename(target) });
  try {
    for (const [name, data] of list) writer.write(name, data);
  } catch (e) {
    writer.abort();
    throw e;
  }
  return writer.finish();
}
