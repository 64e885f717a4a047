import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { test } from 'node:test';
import { sha256Hex } from '../src/util/sha256.ts';

test('sha256Hex matches node:crypto on every padding length and on text beyond ASCII', () => {
  // 0-130 bytes cross the one- and two-block paddings (55/56 and 119/120 bytes).
  for (let n = 0; n <= 130; n++) {
    const text = 'abcdefghij'.repeat(13).slice(0, n);
    assert.equal(sha256Hex(text), createHash('sha256').update(text).digest('hex'), `${n} bytes`);
  }
  for (const text of ['é🙂 naïve', '{"a":1,"b":[2,3]}', 'x'.repeat(100_000)]) assert.equal(sha256Hex(text), createHash('sha256').update(text).digest('hex'));
  assert.equal(sha256Hex('abc'), 'ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad');
});
