// Reading safetensors files: one file, or a sharded checkpoint through its
// model.safetensors.index.json.
//
// Layout: 8-byte little-endian header length N, N bytes of JSON
// {"__metadata__": {...}, name: {dtype, shape, data_offsets: [begin, end]}} with offsets
// relative to the data section at 8 + N. Only the header is read on open; tensors are
// read one at a time with positional reads, so loading a model never needs the whole
// file (or twice the model) in host memory. The header is checked the way the Rust
// safetensors library checks it (tensors tile the data section exactly), so a truncated
// or corrupt file fails on open with the file and tensor named, not later as garbage.

import * as path from '../storage/paths.ts';
import { storage, type ReadableFile } from '../storage/storage.ts';
import { SafetensorsError } from './errors.ts';
import { bf16ToF32, f16ToF32 } from '../util/half.ts';

export const DTYPE_BYTES: Record<string, number> = {
  BOOL: 1, U8: 1, I8: 1, F8_E5M2: 1, F8_E4M3: 1,
  I16: 2, U16: 2, F16: 2, BF16: 2,
  I32: 4, U32: 4, F32: 4,
  I64: 8, U64: 8, F64: 8,
};

/** Dtypes decoded to Float32Array. */
export const FLOAT_DTYPES = ['F32', 'F16', 'BF16'] as const;
export type FloatDType = (typeof FLOAT_DTYPES)[number];

const MAX_HEADER_BYTES = 100_000_000;
const READ_CHUNK = 1 << 30;
const LITTLE_ENDIAN = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1;

export interface TensorInfo {
  name: string;
  dtype: string;
  shape: number[];
  /** The file holding it. */
  file: string;
  /** Absolute byte offset of its data in the file. */
  offset: number;
  byteLength: number;
}

export interface SafetensorsHeader {
  metadata: Record<string, string>;
  tensors: Map<string, TensorInfo>;
  dataStart: number;
}

function prod(shape: readonly number[]): number {
  let n = 1;
  for (const d of shape) n *= d;
  return n;
}

/**
 * Validates a header (the JSON text after the length prefix) for a file of `fileSize`
 * bytes whose header length prefix is `headerLength`.
 */
export function parseHeader(json: string, file: string, headerLength: number, fileSize: number): SafetensorsHeader {
  const where = path.basename(file);
  let obj: unknown;
  try {
    obj = JSON.parse(json);
  } catch (e) {
    throw new SafetensorsError(`${where}: header is not valid JSON (${(e as Error).message})`);
  }
  if (typeof obj !== 'object' || obj === null || Array.isArray(obj)) throw new SafetensorsError(`${where}: header is not a JSON object`);
  const dataStart = 8 + headerLength;
  const dataSize = fileSize - dataStart;
  const metadata: Record<string, string> = {};
  const tensors = new Map<string, TensorInfo>();
  for (const [name, entry] of Object.entries(obj as Record<string, unknown>)) {
    if (name === '__metadata__') {
      if (typeof entry !== 'object' || entry === null) throw new SafetensorsError(`${where}: __metadata__ is not an object`);
      for (const [k, v] of Object.entries(entry)) {
        if (typeof v !== 'string') throw new SafetensorsError(`${where}: __metadata__.${k} is not a string`);
        metadata[k] = v;
      }
      continue;
    }
    const bad = (why: string): never => {
      throw new SafetensorsError(`${where}: tensor "${name}": ${why}`);
    };
    if (typeof entry !== 'object' || entry === null) bad('entry is not an object');
    const { dtype, shape, data_offsets: offsets } = entry as Record<string, unknown>;
    if (typeof dtype !== 'string' || !(dtype in DTYPE_BYTES)) bad(`unknown dtype ${JSON.stringify(dtype)}`);
    if (!Array.isArray(shape) || !shape.every((d) => Number.isSafeInteger(d) && d >= 0)) bad(`invalid shape ${JSON.stringify(shape)}`);
    if (!Array.isArray(offsets) || offsets.length !== 2 || !offsets.every((o) => Number.isSafeInteger(o) && o >= 0)) {
      bad(`invalid data_offsets ${JSON.stringify(offsets)}`);
    }
    const [begin, end] = offsets as number[];
    if (end < begin) bad(`data_offsets [${begin}, ${end}] end before begin`);
    if (end > dataSize) bad(`data_offsets [${begin}, ${end}] run past the end of the data section (${dataSize} bytes; file truncated?)`);
    const want = prod(shape as number[]) * DTYPE_BYTES[dtype as string];
    if (end - begin !== want) bad(`holds ${end - begin} bytes but shape [${(shape as number[]).join(', ')}] x ${dtype} needs ${want}`);
    tensors.set(name, { name, dtype: dtype as string, shape: shape as number[], file, offset: dataStart + begin, byteLength: end - begin });
  }
  checkTiling([...tensors.values()], where, dataStart, dataSize);
  return { metadata, tensors, dataStart };
}

/** Tensors must cover the data section back to back: a gap or overlap means a corrupt header. */
function checkTiling(infos: TensorInfo[], where: string, dataStart: number, dataSize: number): void {
  const sorted = infos.slice().sort((a, b) => a.offset - b.offset || a.byteLength - b.byteLength);
  let pos = dataStart;
  let prev: TensorInfo | null = null;
  for (const t of sorted) {
    if (t.offset < pos) {
      throw new SafetensorsError(`${where}: tensor "${t.name}" data_offsets overlap tensor "${prev?.name}" (starts at ${t.offset - dataStart}, previous ends at ${pos - dataStart})`);
    }
    if (t.offset > pos) {
      throw new SafetensorsError(`${where}: tensor "${t.name}" data_offsets leave a gap (starts at ${t.offset - dataStart}, previous ends at ${pos - dataStart})`);
    }
    pos = t.offset + t.byteLength;
    prev = t;
  }
  if (pos !== dataStart + dataSize) {
    throw new SafetensorsError(`${where}: ${dataStart + dataSize - pos} bytes after the last tensor are not described by the header`);
  }
}

function readFully(handle: ReadableFile, into: Uint8Array, position: number, file: string, name: string): void {
  let done = 0;
  while (done < into.length) {
    const len = Math.min(READ_CHUNK, into.length - done);
    const n = handle.read(into.subarray(done, done + len), position + done);
    if (n === 0) throw new SafetensorsError(`${path.basename(file)}: tensor "${name}": unexpected end of file`);
    done += n;
  }
}

/** One open .safetensors file: header parsed and checked, data read on demand. */
export class SafetensorsFile {
  private handle: ReadableFile | null;

  private constructor(
    readonly path: string,
    readonly header: SafetensorsHeader,
    handle: ReadableFile,
  ) {
    this.handle = handle;
  }

  static open(file: string): SafetensorsFile {
    const where = path.basename(file);
    let handle: ReadableFile;
    try {
      handle = storage().openRead(file);
    } catch (e) {
      throw new SafetensorsError(`${file}: cannot open (${(e as Error).message})`);
    }
    try {
      const size = handle.size;
      if (size < 8) throw new SafetensorsError(`${where}: ${size} bytes is too short for a safetensors header`);
      const prefix = new Uint8Array(8);
      readFully(handle, prefix, 0, file, '(header)');
      const n = Number(new DataView(prefix.buffer).getBigUint64(0, true));
      if (n > size - 8) throw new SafetensorsError(`${where}: header length ${n} runs past the end of the file (${size} bytes; truncated?)`);
      if (n > MAX_HEADER_BYTES) throw new SafetensorsError(`${where}: header length ${n} exceeds ${MAX_HEADER_BYTES} bytes`);
      const json = new Uint8Array(n);
      readFully(handle, json, 8, file, '(header)');
      const header = parseHeader(new TextDecoder().decode(json), file, n, size);
      return new SafetensorsFile(file, header, handle);
    } catch (e) {
      handle.close();
      throw e;
    }
  }

  get metadata(): Record<string, string> {
    return this.header.metadata;
  }

  names(): string[] {
    return [...this.header.tensors.keys()];
  }

  info(name: string): TensorInfo {
    const t = this.header.tensors.get(name);
    if (!t) throw new SafetensorsError(`${path.basename(this.path)}: no tensor "${name}"`);
    return t;
  }

  /** The tensor's stored bytes, in a fresh 8-byte-aligned buffer. */
  readBytes(name: string): Uint8Array {
    const t = this.info(name);
    if (this.handle === null) throw new SafetensorsError(`${path.basename(this.path)}: tensor "${name}": file is closed`);
    const out = new Uint8Array(new ArrayBuffer(t.byteLength));
    readFully(this.handle, out, t.offset, this.path, name);
    return out;
  }

  /** F32, F16 or BF16 data as f32 values. */
  readFloat32(name: string): Float32Array {
    const t = this.info(name);
    checkEndianness(this.path, name);
    if (!(FLOAT_DTYPES as readonly string[]).includes(t.dtype)) {
      throw new SafetensorsError(`${path.basename(this.path)}: tensor "${name}" has dtype ${t.dtype}; only ${FLOAT_DTYPES.join(', ')} are supported`);
    }
    const bytes = this.readBytes(name);
    if (t.dtype === 'F32') return new Float32Array(bytes.buffer);
    const halves = new Uint16Array(bytes.buffer);
    return t.dtype === 'BF16' ? bf16ToF32(halves) : f16ToF32(halves);
  }

  /** I32 or I64 data (token ids, masks) as int32 values. */
  readInt32(name: string): Int32Array {
    const t = this.info(name);
    checkEndianness(this.path, name);
    if (t.dtype === 'I32') return new Int32Array(this.readBytes(name).buffer);
    if (t.dtype !== 'I64') throw new SafetensorsError(`${path.basename(this.path)}: tensor "${name}" has dtype ${t.dtype}; expected I32 or I64`);
    const wide = new BigInt64Array(this.readBytes(name).buffer);
    const out = new Int32Array(wide.length);
    for (let i = 0; i < wide.length; i++) {
      const v = wide[i];
      if (v > 2147483647n || v < -2147483648n) throw new SafetensorsError(`${path.basename(this.path)}: tensor "${name}" element ${i} (${v}) does not fit in int32`);
      out[i] = Number(v);
    }
    return out;
  }

  close(): void {
    this.handle?.close();
    this.handle = null;
  }
}

function checkEndianness(file: string, name: string): void {
  if (!LITTLE_ENDIAN) throw new SafetensorsError(`${path.basename(file)}: tensor "${name}": big-endian hosts are not supported`);
}

export const INDEX_FILE = 'model.safetensors.index.json';
export const SINGLE_FILE = 'model.safetensors';

/**
 * Tensors of a whole checkpoint: a single .safetensors file, or the shards named by an
 * index's weight_map. Every shard's header is checked on open; each tensor must be in
 * the shard its weight_map entry names, and nowhere else.
 */
export class SafetensorsReader {
  private constructor(
    private readonly files: SafetensorsFile[],
    private readonly where: Map<string, SafetensorsFile>,
    /** The index's metadata (sharded) or the single file's __metadata__. */
    readonly metadata: Record<string, unknown>,
    /** The file or index it was opened from, for messages. */
    readonly source: string,
  ) {}

  /** `target`: a .safetensors file, an index .json, or a directory holding model.safetensors or its index. */
  static open(target: string): SafetensorsReader {
    let file = target;
    const fs = storage();
    if (fs.stat(target)?.isDirectory) {
      const index = path.join(target, INDEX_FILE);
      const single = path.join(target, SINGLE_FILE);
      if (fs.exists(index)) file = index;
      else if (fs.exists(single)) file = single;
      else throw new SafetensorsError(`${target}: neither ${SINGLE_FILE} nor ${INDEX_FILE} found`);
    }
    if (file.endsWith('.json')) return SafetensorsReader.openIndex(file);
    const f = SafetensorsFile.open(file);
    return new SafetensorsReader([f], new Map(f.names().map((n) => [n, f])), f.metadata, file);
  }

  private static openIndex(indexPath: string): SafetensorsReader {
    const where = path.basename(indexPath);
    let index: { metadata?: Record<string, unknown>; weight_map?: Record<string, unknown> };
    try {
      index = JSON.parse(storage().readText(indexPath));
    } catch (e) {
      throw new SafetensorsError(`${indexPath}: cannot read index (${(e as Error).message})`);
    }
    const map = index.weight_map;
    if (typeof map !== 'object' || map === null) throw new SafetensorsError(`${where}: weight_map is missing`);
    const byFile = new Map<string, string[]>();
    for (const [name, shard] of Object.entries(map)) {
      if (typeof shard !== 'string' || shard.includes('/') || shard.includes('\\')) {
        throw new SafetensorsError(`${where}: weight_map["${name}"] is not a file name: ${JSON.stringify(shard)}`);
      }
      byFile.set(shard, [...(byFile.get(shard) ?? []), name]);
    }
    const files: SafetensorsFile[] = [];
    const owner = new Map<string, SafetensorsFile>();
    try {
      for (const [shard, names] of byFile) {
        const shardPath = path.join(path.dirname(indexPath), shard);
        if (!storage().exists(shardPath)) throw new SafetensorsError(`${where}: shard ${shard} (holding "${names[0]}") is missing`);
        const f = SafetensorsFile.open(shardPath);
        files.push(f);
        for (const name of names) {
          if (!f.header.tensors.has(name)) throw new SafetensorsError(`${shard}: tensor "${name}" listed in ${where} is missing from the shard`);
        }
        for (const name of f.names()) {
          if (map[name] !== shard) throw new SafetensorsError(`${shard}: tensor "${name}" is not assigned to this shard by ${where}`);
          owner.set(name, f);
        }
      }
    } catch (e) {
      for (const f of files) f.close();
      throw e;
    }
    return new SafetensorsReader(files, owner, index.metadata ?? {}, indexPath);
  }

  names(): string[] {
    return [...this.where.keys()];
  }

  has(name: string): boolean {
    return this.where.has(name);
  }

  private file(name: string): SafetensorsFile {
    const f = this.where.get(name);
    if (!f) throw new SafetensorsError(`${path.basename(this.source)}: no tensor "${name}"`);
    return f;
  }

  info(name: string): TensorInfo {
    return this.file(name).info(name);
  }

  /**
   * Checks that the tensors are exactly `expected` (name -> shape), each in a float dtype.
   * Names `ignore` accepts may be present besides (weights the model does not use).
   */
  expectShapes(expected: ReadonlyMap<string, readonly number[]>, ignore: (name: string) => boolean = () => false): void {
    for (const [name, shape] of expected) {
      const f = this.where.get(name);
      if (!f) throw new SafetensorsError(`${path.basename(this.source)}: tensor "${name}" is missing (expected shape [${shape.join(', ')}])`);
      const t = f.info(name);
      if (t.shape.length !== shape.length || t.shape.some((d, i) => d !== shape[i])) {
        throw new SafetensorsError(`${path.basename(t.file)}: tensor "${name}" has shape [${t.shape.join(', ')}] but the config implies [${shape.join(', ')}]`);
      }
      if (!(FLOAT_DTYPES as readonly string[]).includes(t.dtype)) {
        throw new SafetensorsError(`${path.basename(t.file)}: tensor "${name}" has dtype ${t.dtype}; only ${FLOAT_DTYPES.join(', ')} are supported`);
      }
    }
    for (const [name, f] of this.where) {
      if (!expected.has(name) && !ignore(name)) {
        throw new SafetensorsError(`${path.basename(f.path)}: unexpected tensor "${name}" (not a parameter of the configured model)`);
      }
    }
  }

  readFloat32(name: string): Float32Array {
    return this.file(name).readFloat32(name);
  }

  readInt32(name: string): Int32Array {
    return this.file(name).readInt32(name);
  }

  close(): void {
    for (const f of this.files) f.close();
  }
}
