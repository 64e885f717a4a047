// TensorBoard event files, written by hand so no TensorFlow or protobuf package is
// needed. An event file is a sequence of TFRecords:
//   uint64 length (LE) | uint32 masked CRC-32C of the length bytes | data | uint32 masked CRC-32C of data
// where each record's data is an Event protobuf. The first event carries file_version
// "brain.Event:2"; each later one a step, a wall time and a Summary of scalar values:
//   Event   { double wall_time = 1; int64 step = 2; string file_version = 3; Summary summary = 5; }
//   Summary { repeated Value value = 1; }   Value { string tag = 1; float simple_value = 2; }

import { hostProcess, storage, type AppendableFile } from '../storage/storage.ts';
import * as path from '../storage/paths.ts';

const CRC32C_TABLE = (() => {
  const t = new Uint32Array(256);
  for (let n = 0; n < 256; n++) {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? (c >>> 1) ^ 0x82f63b78 : c >>> 1;
    t[n] = c >>> 0;
  }
  return t;
})();

/** CRC-32C (Castagnoli), as TFRecord framing uses it. */
export function crc32c(bytes: Uint8Array): number {
  let c = 0xffffffff;
  for (let i = 0; i < bytes.length; i++) c = CRC32C_TABLE[(c ^ bytes[i]) & 0xff] ^ (c >>> 8);
  return (c ^ 0xffffffff) >>> 0;
}

/** TFRecord's masking, so a CRC stored inside CRC'd data does not weaken the check. */
export function maskedCrc32c(bytes: Uint8Array): number {
  const c = crc32c(bytes);
  return ((((c >>> 15) | (c << 17)) >>> 0) + 0xa282ead8) >>> 0;
}

export function frameRecord(data: Uint8Array): Uint8Array {
  const out = new Uint8Array(8 + 4 + data.length + 4);
  const view = new DataView(out.buffer);
  view.setBigUint64(0, BigInt(data.length), true);
  view.setUint32(8, maskedCrc32c(out.subarray(0, 8)), true);
  out.set(data, 12);
  view.setUint32(12 + data.length, maskedCrc32c(data), true);
  return out;
}

class ProtoWriter {
  private bytes: number[] = [];

  varint(v: number): this {
    if (!(Number.isSafeInteger(v) && v >= 0)) throw new RangeError(`protobuf varint: expected a non-negative safe integer, got ${v}`);
    while (v >= 0x80) {
      this.bytes.push((v % 0x80) | 0x80);
      v = Math.floor(v / 0x80);
    }
    this.bytes.push(v);
    return this;
  }

  tag(field: number, wireType: number): this {
    return this.varint(field * 8 + wireType);
  }

  double(field: number, v: number): this {
    const b = new Uint8Array(8);
    new DataView(b.buffer).setFloat64(0, v, true);
    this.tag(field, 1).bytes.push(...b);
    return this;
  }

  float(field: number, v: number): this {
    const b = new Uint8Array(4);
    new DataView(b.buffer).setFloat32(0, v, true);
    this.tag(field, 5).bytes.push(...b);
    return this;
  }

  int(field: number, v: number): this {
    return this.tag(field, 0).varint(v);
  }

  message(field: number, body: Uint8Array): this {
    this.tag(field, 2).varint(body.length);
    for (const b of body) this.bytes.push(b);
    return this;
  }

  string(field: number, s: string): this {
    return this.message(field, new TextEncoder().encode(s));
  }

  finish(): Uint8Array {
    return Uint8Array.from(this.bytes);
  }
}

export interface EventFields {
  wallTime: number;
  step?: number;
  fileVersion?: string;
  scalars?: readonly (readonly [tag: string, value: number])[];
}

export function encodeEvent(e: EventFields): Uint8Array {
  const w = new ProtoWriter().double(1, e.wallTime);
  if (e.step !== undefined) w.int(2, e.step);
  if (e.fileVersion !== undefined) w.string(3, e.fileVersion);
  if (e.scalars) {
    const summary = new ProtoWriter();
    for (const [tag, value] of e.scalars) summary.message(1, new ProtoWriter().string(1, tag).float(2, value).finish());
    w.message(5, summary.finish());
  }
  return w.finish();
}

/** Appends scalar summaries to one event file in `dir`. */
export class TensorBoardWriter {
  private out: AppendableFile | null;

  private constructor(readonly file: string, out: AppendableFile) {
    this.out = out;
  }

  static open(dir: string, wallTime = Date.now() / 1000): TensorBoardWriter {
    storage().makeDir(dir);
    const host = hostProcess();
    const file = path.join(dir, `events.out.tfevents.${Math.floor(wallTime)}.${host.hostname}.${host.pid}`);
    const w = new TensorBoardWriter(file, storage().openAppend(file));
    w.append(encodeEvent({ wallTime, fileVersion: 'brain.Event:2' }));
    return w;
  }

  /** One event with every finite value of `metrics` as a scalar at `step`. */
  scalars(step: number, metrics: Readonly<Record<string, number>>, wallTime = Date.now() / 1000): void {
    const values = Object.entries(metrics).filter(([, v]) => Number.isFinite(v));
    if (values.length) this.append(encodeEvent({ wallTime, step, scalars: values }));
  }

  private append(event: Uint8Array): void {
    if (this.out === null) throw new Error(`TensorBoardWriter: ${this.file} is closed`);
    this.out.append(frameRecord(event));
  }

  close(): void {
    this.out?.close();
    this.out = null;
  }
}
