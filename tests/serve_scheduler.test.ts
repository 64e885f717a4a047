import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { GenerationRequest, GenerationResult } from '../src/engines/engine.ts';
import type { LocalEngine } from '../src/engines/local_engine.ts';
import { BatchScheduler } from '../src/serve/scheduler.ts';
import { scopeAsync } from '../src/tensor/scope.ts';

const pause = () => new Promise((resolve) => setTimeout(resolve, 5));

/** An engine whose generate holds an async tensor scope open across a few event-loop turns, as the local engine's decoding does. */
function scopedEngine(log: string[], name: string): LocalEngine {
  const generate = (requests: GenerationRequest[]) => scopeAsync(async () => {
    log.push(`${name} start`);
    for (let i = 0; i < 3; i++) await pause();
    log.push(`${name} end`);
    return requests.map(() => ({ text: name }) as unknown as GenerationResult);
  });
  return { generate } as unknown as LocalEngine;
}

describe('serve scheduler', () => {
  test('two schedulers of one process (two servers in it) take turns: their jobs\' scopes never overlap', async () => {
    const log: string[] = [];
    const a = new BatchScheduler(scopedEngine(log, 'a'), 8);
    const b = new BatchScheduler(scopedEngine(log, 'b'), 8);
    const request = { promptIds: [1], maxTokens: 1 } as unknown as GenerationRequest;
    const results = await Promise.all([
      a.generate(undefined, [request]),
      b.generate(undefined, [request]),
      b.exclusive(() => scopeAsync(async () => { log.push('b task start'); await pause(); log.push('b task end'); return 'done'; })),
      a.generate(undefined, [request]),
    ]);
    assert.equal(results[2], 'done');
    for (let i = 0; i < log.length; i += 2) {
      assert.equal(log[i].replace(/ start$/, ''), log[i + 1].replace(/ end$/, ''), `interleaved: ${log.join(', ')}`);
    }
    assert.equal(log.length, 8);
  });
});
