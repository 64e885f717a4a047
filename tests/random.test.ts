// The trainer's generator (src/util/random.ts Rng): xoshiro128** against the reference
// C implementation's outputs, serialisable state that resumes the exact stream, and
// unbiased helpers.

import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { Rng } from '../src/util/random.ts';

describe('Rng', () => {
  test('xoshiro128** matches the reference implementation', () => {
    // Outputs of Blackman and Vigna's xoshiro128starstar.c from these states.
    const a = Rng.fromState([1, 2, 3, 4]);
    assert.deepEqual(Array.from({ length: 6 }, () => a.nextU32()), [11520, 0, 5927040, 70819200, 2031721883, 1637235492]);
    const b = Rng.fromState([0x9e3779b9, 0xdeadbeef, 12345, 0xffffffff]);
    for (let i = 0; i < 1000; i++) b.nextU32();
    assert.deepEqual([b.nextU32(), b.nextU32()], [158576520, 4011838871]);
  });

  test('state round trip resumes the identical stream', () => {
    const r = Rng.seeded(42, 'tasks');
    for (let i = 0; i < 37; i++) r.next();
    const saved = JSON.parse(JSON.stringify(r.state()));
    const expected = [r.nextU32(), r.int(7), r.next(), r.seed(), ...r.sample(1000, 5), ...r.shuffle([1, 2, 3, 4, 5])];
    const resumed = Rng.fromState(saved);
    assert.deepEqual([resumed.nextU32(), resumed.int(7), resumed.next(), resumed.seed(), ...resumed.sample(1000, 5), ...resumed.shuffle([1, 2, 3, 4, 5])], expected);
  });

  test('seeds and stream names give distinct streams; the same ones give the same', () => {
    const first = (r: Rng) => Array.from({ length: 4 }, () => r.nextU32());
    assert.deepEqual(first(Rng.seeded(7)), first(Rng.seeded(7)));
    assert.notDeepEqual(first(Rng.seeded(7)), first(Rng.seeded(8)));
    assert.notDeepEqual(first(Rng.seeded(7, 'tasks')), first(Rng.seeded(7, 'engine')));
    assert.notDeepEqual(first(Rng.seeded(2 ** 32 + 7)), first(Rng.seeded(7)));
  });

  test('int is in range and roughly uniform; sample draws distinct indices', () => {
    const r = Rng.seeded(1);
    const counts = new Array(6).fill(0);
    for (let i = 0; i < 60000; i++) counts[r.int(6)]++;
    for (const c of counts) assert.ok(Math.abs(c - 10000) < 500, `bucket ${c}`);
    for (let i = 0; i < 1000; i++) {
      const x = r.next();
      assert.ok(x >= 0 && x < 1);
    }
    const s = r.sample(10, 10);
    assert.deepEqual([...s].sort((x, y) => x - y), [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
    assert.equal(new Set(r.sample(1e9, 50)).size, 50);
    for (let i = 0; i < 100; i++) {
      const seed = r.seed();
      assert.ok(Number.isInteger(seed) && seed >= 0 && seed < 2 ** 31);
    }
  });

  test('bad states and arguments are refused', () => {
    assert.throws(() => Rng.fromState([0, 0, 0, 0]), /all-zero/);
    assert.throws(() => Rng.fromState([1, 2, 3]), /four unsigned 32-bit integers/);
    assert.throws(() => Rng.fromState([1, 2, 3, 2 ** 32]), /four unsigned 32-bit integers/);
    assert.throws(() => Rng.seeded(1.5), /safe integer/);
    assert.throws(() => Rng.seeded(0).int(0), /n must be/);
    assert.throws(() => Rng.seeded(0).sample(3, 4), /0 <= k <= n/);
  });
});
