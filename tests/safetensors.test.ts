import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { after, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { SafetensorsError } from '../src/safetensors/errors.ts';
import { bf16ToF32, f16ToF32, f32ToBf16, f32ToF16 } from '../src/util/half.ts';
import { SafetensorsFile, SafetensorsReader } from '../src/safetensors/reader.ts';
import { SafetensorsWriter, writeSafetensors, type TensorEntry } from '../src/safetensors/writer.ts';
import { randn } from '../src/util/random.ts';

const FIXTURES = path.join(path.dirname(fileURLToPath(import.meta.url)), 'fixtures');
const tmpRoot = fs.mkdtempSync(path.join(os.tmpdir(), 'safetensors-test-'));
after(() => fs.rmSync(tmpRoot, { recursive: true, force: true }));

let tmpCount = 0;
function tmpDir(): string {
  const d = path.join(tmpRoot, String(tmpCount++));
  fs.mkdirSync(d);
  return d;
}

function sum(a: ArrayLike<number>, f = (x: number) => x): number {
  let s = 0;
  for (let i = 0; i < a.length; i++) s += f(a[i]);
  return s;
}

/** A safetensors file from a hand-written header and a data section. */
function rawFile(file: string, header: unknown, dataBytes: number, lengthOverride?: bigint): void {
  const json = new TextEncoder().encode(JSON.stringify(header));
  const out = new Uint8Array(8 + json.length + dataBytes);
  new DataView(out.buffer).setBigUint64(0, lengthOverride ?? BigInt(json.length), true);
  out.set(json, 8);
  fs.writeFileSync(file, out);
}

function bitsOf(a: Float32Array): Uint32Array {
  return new Uint32Array(a.buffer, a.byteOffset, a.length);
}

describe('safetensors reading', () => {
  // Sums computed independently with numpy over the raw file bytes.
  const fixtureStats: [string, number, number, number, number][] = [
    ['qwen2-tiny', 26, 63.41098613, 63.49352795, -9.319185235],
    ['qwen3-tiny', 36, 95.55234313, 96.19486912, -6.273989781],
    ['qwen35-tiny', 55, 65.03092951, 66.67843861, 10.91604193],
  ];

  test('fixture model.safetensors: tensor count, metadata and values match numpy', () => {
    for (const [name, count, normSum, normSumSq, embedSum] of fixtureStats) {
      const f = SafetensorsFile.open(path.join(FIXTURES, name, 'model.safetensors'));
      try {
        assert.equal(f.names().length, count, name);
        assert.equal(f.metadata.format, 'pt');
        const norm = f.readFloat32('model.norm.weight');
        assert.ok(Math.abs(sum(norm) - normSum) < 1e-6, `${name} norm sum ${sum(norm)}`);
        assert.ok(Math.abs(sum(norm, (x) => x * x) - normSumSq) < 1e-6, `${name} norm sum of squares`);
        const embed = f.readFloat32('model.embed_tokens.weight');
        assert.equal(embed.length, f.info('model.embed_tokens.weight').shape.reduce((a, b) => a * b));
        assert.ok(Math.abs(sum(embed) - embedSum) < 1e-6, `${name} embed sum ${sum(embed)}`);
      } finally {
        f.close();
      }
    }
    const q2 = SafetensorsFile.open(path.join(FIXTURES, 'qwen2-tiny', 'model.safetensors'));
    assert.deepEqual([...q2.readFloat32('model.norm.weight').slice(0, 3)], [1.0278726816177368, 1.0360300540924072, 0.8853392004966736]);
    q2.close();
  });

  test('expected.safetensors: names and shapes as expected.json lists, ids, and logprobs consistent with logits', () => {
    for (const name of ['qwen2-tiny', 'qwen3-tiny', 'qwen35-tiny']) {
      const listed = JSON.parse(fs.readFileSync(path.join(FIXTURES, name, 'expected.json'), 'utf8')).tensors as Record<string, number[]>;
      const r = SafetensorsReader.open(path.join(FIXTURES, name, 'expected.safetensors'));
      try {
        assert.deepEqual(new Set(r.names()), new Set(Object.keys(listed)), name);
        for (const [t, shape] of Object.entries(listed)) assert.deepEqual(r.info(t).shape, shape, `${name} ${t}`);
        const ids = r.readInt32('input_ids');
        const [B, T, V] = listed.logits;
        const logits = r.readFloat32('logits');
        const logprobs = r.readFloat32('token_logprobs');
        for (let b = 0; b < B; b++) {
          for (let t = 0; t < T - 1; t++) {
            const row = logits.subarray((b * T + t) * V, (b * T + t + 1) * V);
            let max = -Infinity;
            for (const x of row) max = Math.max(max, x);
            const lse = max + Math.log(sum(row, (x) => Math.exp(x - max)));
            const want = row[ids[b * T + t + 1]] - lse;
            assert.ok(Math.abs(logprobs[b * (T - 1) + t] - want) < 1e-4, `${name} logprob [${b}, ${t}]`);
          }
        }
        const loss = r.readFloat32('loss')[0];
        assert.ok(Math.abs(loss + sum(logprobs) / logprobs.length) < 1e-5, `${name} loss ${loss}`);
        assert.throws(() => r.readFloat32('input_ids'), /input_ids.*I32/);
      } finally {
        r.close();
      }
    }
    const q2 = SafetensorsReader.open(path.join(FIXTURES, 'qwen2-tiny', 'expected.safetensors'));
    assert.deepEqual([...q2.readInt32('input_ids').slice(0, 4)], [168, 207, 301, 264]);
    q2.close();
  });
});

describe('f16 and bf16', () => {
  test('decode known bit patterns', () => {
    const f16 = f16ToF32(new Uint16Array([0x3c00, 0xc000, 0x7bff, 0x0001, 0x0400, 0x7c00, 0xfc00, 0x3555, 0x8000, 0x7e00]));
    assert.deepEqual([...f16.slice(0, 8)], [1, -2, 65504, 2 ** -24, 2 ** -14, Infinity, -Infinity, 0.333251953125]);
    assert.ok(Object.is(f16[8], -0));
    assert.ok(Number.isNaN(f16[9]));
    const bf16 = bf16ToF32(new Uint16Array([0x3f80, 0xc000, 0x4049, 0x7f80, 0x0001, 0x7f7f, 0x7fc0]));
    assert.deepEqual([...bf16.slice(0, 6)], [1, -2, 3.140625, Infinity, 2 ** -133, 3.3895313892515355e38]);
    assert.ok(Number.isNaN(bf16[6]));
  });

  test('encode rounds to nearest even and saturates to infinity', () => {
    const f16 = f32ToF16(new Float32Array([1 + 2 ** -11, 1 + 3 * 2 ** -11, 65519, 65520, 2 ** -25, 3 * 2 ** -25, -1e-9, 2 ** -14, NaN]));
    assert.deepEqual([...f16.slice(0, 8)], [0x3c00, 0x3c02, 0x7bff, 0x7c00, 0x0000, 0x0002, 0x8000, 0x0400]);
    assert.equal(f16[8] & 0x7c00, 0x7c00);
    assert.notEqual(f16[8] & 0x3ff, 0);
    const bf16 = f32ToBf16(new Float32Array([1 + 2 ** -8, 1 + 3 * 2 ** -8, 3.4e38, -Infinity, NaN]));
    assert.deepEqual([...bf16.slice(0, 4)], [0x3f80, 0x3f82, 0x7f80, 0xff80]);
    assert.equal(bf16[4] & 0x7fc0, 0x7fc0);
  });

  test('every non-NaN half and bfloat16 value survives decode then encode', () => {
    const all = new Uint16Array(65536).map((_, i) => i);
    const h = f32ToF16(f16ToF32(all));
    const b = f32ToBf16(bf16ToF32(all));
    for (let i = 0; i < 65536; i++) {
      if ((i & 0x7c00) !== 0x7c00 || (i & 0x3ff) === 0) assert.equal(h[i], i, `f16 ${i.toString(16)}`);
      if ((i & 0x7f80) !== 0x7f80 || (i & 0x7f) === 0) assert.equal(b[i], i, `bf16 ${i.toString(16)}`);
    }
  });
});

describe('safetensors writing', () => {
  const tensors: TensorEntry[] = [
    ['model.embed_tokens.weight', randn(7 * 5, 1), [7, 5]],
    ['model.layers.0.self_attn.q_proj.bias', randn(5, 2), [5]],
    ['model.layers.0.mlp.down_proj.weight', randn(5 * 3, 3), [5, 3]],
    ['scalar', new Float32Array([Math.PI]), []],
    ['empty', new Float32Array(0), [0, 4]],
  ];

  test('a single file reads back bit-identically, with an 8-byte aligned data section', () => {
    const file = path.join(tmpDir(), 'model.safetensors');
    const out = writeSafetensors(file, tensors, { metadata: { note: 'x' } });
    assert.deepEqual(out.files, [file]);
    assert.equal(out.index, null);
    const f = SafetensorsFile.open(file);
    assert.equal(f.header.dataStart % 8, 0);
    assert.deepEqual(f.metadata, { format: 'pt', note: 'x' });
    for (const [name, data, shape] of tensors) {
      assert.deepEqual(f.info(name).shape, [...shape]);
      assert.deepEqual(bitsOf(f.readFloat32(name)), bitsOf(data), name);
    }
    f.close();
    assert.deepEqual(fs.readdirSync(path.dirname(file)), ['model.safetensors']);
  });

  test('sharded output: HF shard names, index with total_size and weight_map, reads back bit-identically', () => {
    const dir = tmpDir();
    const out = writeSafetensors(path.join(dir, 'model.safetensors'), tensors, { shardBytes: 64 });
    assert.equal(out.files.length, 3);
    assert.deepEqual(fs.readdirSync(dir).sort(), [
      'model-00001-of-00003.safetensors', 'model-00002-of-00003.safetensors', 'model-00003-of-00003.safetensors', 'model.safetensors.index.json',
    ]);
    const index = JSON.parse(fs.readFileSync(path.join(dir, 'model.safetensors.index.json'), 'utf8'));
    assert.equal(index.metadata.total_size, 4 * (35 + 5 + 15 + 1));
    assert.equal(index.weight_map['model.embed_tokens.weight'], 'model-00001-of-00003.safetensors');
    assert.equal(index.weight_map['model.layers.0.self_attn.q_proj.bias'], 'model-00002-of-00003.safetensors');
    assert.equal(index.weight_map['model.layers.0.mlp.down_proj.weight'], 'model-00003-of-00003.safetensors');
    const r = SafetensorsReader.open(dir);
    assert.deepEqual(new Set(r.names()), new Set(tensors.map(([n]) => n)));
    for (const [name, data] of tensors) assert.deepEqual(bitsOf(r.readFloat32(name)), bitsOf(data), name);
    r.close();
  });

  test('bf16 and f16 storage hold the rounded values', () => {
    const data = randn(64, 9);
    for (const [dtype, round] of [['BF16', (x: Float32Array) => bf16ToF32(f32ToBf16(x))], ['F16', (x: Float32Array) => f16ToF32(f32ToF16(x))]] as const) {
      const file = path.join(tmpDir(), 'half.safetensors');
      writeSafetensors(file, [['w', data, [8, 8]]], { dtype });
      const f = SafetensorsFile.open(file);
      assert.equal(f.info('w').dtype, dtype);
      assert.equal(f.info('w').byteLength, 128);
      assert.deepEqual(bitsOf(f.readFloat32('w')), bitsOf(round(data)));
      f.close();
    }
  });

  test('streaming writer takes tensors in any order and refuses wrong sizes, repeats and missing tensors', () => {
    const dir = tmpDir();
    const w = SafetensorsWriter.create(dir, tensors.map(([name, , shape]) => ({ name, shape })));
    for (const [name, data] of [...tensors].reverse()) w.write(name, data);
    assert.throws(() => w.write('scalar', new Float32Array(1)), /"scalar" written twice/);
    assert.throws(() => w.write('nope', new Float32Array(1)), /"nope" is not in the layout/);
    w.finish();
    const r = SafetensorsReader.open(dir);
    for (const [name, data] of tensors) assert.deepEqual(bitsOf(r.readFloat32(name)), bitsOf(data));
    r.close();

    const dir2 = tmpDir();
    const w2 = SafetensorsWriter.create(dir2, [{ name: 'a', shape: [2, 2] }, { name: 'b', shape: [3] }]);
    assert.throws(() => w2.write('a', new Float32Array(3)), /model.safetensors: tensor "a" has 3 values for shape \[2, 2\]/);
    w2.write('a', new Float32Array(4));
    assert.throws(() => w2.finish(), /never written, first "b"/);
    assert.deepEqual(fs.readdirSync(dir2), [], 'aborted writer leaves no files');
  });
});

describe('corrupt safetensors', () => {
  const good = () => {
    const file = path.join(tmpDir(), 'model.safetensors');
    writeSafetensors(file, [['a.weight', randn(16, 4), [4, 4]], ['b.weight', randn(8, 5), [8]]]);
    return file;
  };

  test('truncated file names the file and the tensor past the end', () => {
    const file = good();
    const bytes = fs.readFileSync(file);
    fs.writeFileSync(file, bytes.subarray(0, bytes.length - 10));
    assert.throws(() => SafetensorsFile.open(file), (e: Error) =>
      e instanceof SafetensorsError && /model\.safetensors: tensor "b\.weight": data_offsets \[64, 96\] run past the end/.test(e.message));
  });

  test('header length past the end of the file', () => {
    const file = good();
    const bytes = new Uint8Array(fs.readFileSync(file));
    new DataView(bytes.buffer).setBigUint64(0, 1n << 40n, true);
    fs.writeFileSync(file, bytes);
    assert.throws(() => SafetensorsFile.open(file), /model\.safetensors: header length 1099511627776 runs past the end of the file/);
    fs.writeFileSync(file, bytes.subarray(0, 5));
    assert.throws(() => SafetensorsFile.open(file), /model\.safetensors: 5 bytes is too short/);
  });

  test('overlapping, gapped, reversed and mis-sized offsets name the tensor', () => {
    const dir = tmpDir();
    const cases: [Record<string, unknown>, number, RegExp][] = [
      [{ x: { dtype: 'F32', shape: [4], data_offsets: [0, 16] }, y: { dtype: 'F32', shape: [4], data_offsets: [8, 24] } }, 24,
        /o\.safetensors: tensor "y" data_offsets overlap tensor "x"/],
      [{ x: { dtype: 'F32', shape: [2], data_offsets: [0, 8] }, y: { dtype: 'F32', shape: [2], data_offsets: [12, 20] } }, 20,
        /tensor "y" data_offsets leave a gap/],
      [{ x: { dtype: 'F32', shape: [2], data_offsets: [8, 0] } }, 8, /tensor "x": data_offsets \[8, 0\] end before begin/],
      [{ x: { dtype: 'F32', shape: [3], data_offsets: [0, 8] } }, 8, /tensor "x": holds 8 bytes but shape \[3\] x F32 needs 12/],
      [{ x: { dtype: 'F32', shape: [2], data_offsets: [0, 8] } }, 12, /4 bytes after the last tensor/],
      [{ x: { dtype: 'Q4', shape: [2], data_offsets: [0, 8] } }, 8, /tensor "x": unknown dtype "Q4"/],
    ];
    for (const [header, size, pattern] of cases) {
      const file = path.join(dir, 'o.safetensors');
      rawFile(file, header, size);
      assert.throws(() => SafetensorsFile.open(file), pattern);
    }
    const file = path.join(dir, 'bad.safetensors');
    rawFile(file, {}, 0, 1n);
    assert.throws(() => SafetensorsFile.open(file), /bad\.safetensors: header is not valid JSON/);
  });

  test('unsupported dtypes and missing tensors are named on read', () => {
    const file = path.join(tmpDir(), 'ints.safetensors');
    rawFile(file, { ids: { dtype: 'I64', shape: [2], data_offsets: [0, 16] }, d: { dtype: 'F64', shape: [1], data_offsets: [16, 24] } }, 24);
    const f = SafetensorsFile.open(file);
    assert.deepEqual([...f.readInt32('ids')], [0, 0]);
    assert.throws(() => f.readFloat32('d'), /ints\.safetensors: tensor "d" has dtype F64; only F32, F16, BF16 are supported/);
    assert.throws(() => f.readFloat32('zzz'), /ints\.safetensors: no tensor "zzz"/);
    f.close();
  });

  test('sharded index pointing at a missing shard or tensor', () => {
    const dir = tmpDir();
    writeSafetensors(path.join(dir, 'model.safetensors'), [['a', randn(4, 1), [4]], ['b', randn(4, 2), [4]]], { shardBytes: 16 });
    const indexPath = path.join(dir, 'model.safetensors.index.json');
    const index = JSON.parse(fs.readFileSync(indexPath, 'utf8'));
    index.weight_map.c = 'model-00002-of-00002.safetensors';
    fs.writeFileSync(indexPath, JSON.stringify(index));
    assert.throws(() => SafetensorsReader.open(dir), /model-00002-of-00002\.safetensors: tensor "c" listed in model\.safetensors\.index\.json is missing/);
    delete index.weight_map.c;
    index.weight_map.b = 'model-00009-of-00009.safetensors';
    fs.writeFileSync(indexPath, JSON.stringify(index));
    assert.throws(() => SafetensorsReader.open(dir), /shard model-00009-of-00009\.safetensors \(holding "b"\) is missing/);
  });

  test('expectShapes names the file and tensor of a mismatch', () => {
    const file = good();
    const r = SafetensorsReader.open(file);
    assert.throws(() => r.expectShapes(new Map([['a.weight', [4, 4]], ['b.weight', [9]]])),
      /model\.safetensors: tensor "b\.weight" has shape \[8\] but the config implies \[9\]/);
    assert.throws(() => r.expectShapes(new Map([['a.weight', [4, 4]], ['b.weight', [8]], ['c.weight', [1]]])),
      /model\.safetensors: tensor "c\.weight" is missing \(expected shape \[1\]\)/);
    assert.throws(() => r.expectShapes(new Map([['a.weight', [4, 4]]])), /unexpected tensor "b\.weight"/);
    r.expectShapes(new Map([['a.weight', [4, 4]]]), (n) => n === 'b.weight');
    r.close();
  });
});
