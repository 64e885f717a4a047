// The progress display: a bar redrawn in place on a terminal, plain lines on a pipe,
// and the timer that keeps both going through a phase that reports nothing for a while.

import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { PLAIN_EVERY_MS, Progress, type Ticker } from '../src/report/progress.ts';
import { formatDuration, secondsLeft } from '../src/report/time_left.ts';

const sink = (isTTY: boolean) => {
  const writes: string[] = [];
  return { writes, out: { isTTY, columns: 200, write: (s: string) => writes.push(s) } };
};

/** A ticker the test fires by hand; `running` counts the timers not stopped. */
function manualTicker() {
  const timers = new Set<() => void>();
  const ticker: Ticker = (_ms, fn) => {
    timers.add(fn);
    return () => timers.delete(fn);
  };
  return { ticker, tick: () => [...timers].forEach((fn) => fn()), running: () => timers.size };
}

describe('progress', () => {
  test('a pipe gets plain lines at each quarter and at the end', () => {
    const { writes, out } = sink(false);
    let t = 0;
    const clock = manualTicker();
    const p = new Progress(out, 'auto', () => t, clock.ticker);
    assert.equal(p.mode, 'plain');
    const ph = p.phase('rollout', 8);
    for (let i = 1; i <= 8; i++) {
      t += 500;
      ph.update(i, `${i} done`);
    }
    ph.finish('8 trajectories');
    p.line('iter 1/1');
    assert.deepEqual(writes, [
      'rollout 2/8 1.0s, about 3 s left  2 done\n', 'rollout 4/8 2.0s, about 2 s left  4 done\n', 'rollout 6/8 3.0s, about 1 s left  6 done\n', 'rollout 8/8 4.0s  8 trajectories\n', 'iter 1/1\n',
    ]);
    assert.ok(writes.every((w) => !w.includes('\r')));
    assert.equal(clock.running(), 0, 'finish stops the timer');
  });

  test('a pipe gets a line at least every few seconds, from the timer or from updates', () => {
    const { writes, out } = sink(false);
    let t = 0;
    const clock = manualTicker();
    const p = new Progress(out, 'plain', () => t, clock.ticker);
    const ph = p.phase('update 3', 100);
    t = PLAIN_EVERY_MS - 1;
    clock.tick();
    assert.deepEqual(writes, [], 'nothing before the interval');
    t = PLAIN_EVERY_MS;
    clock.tick();
    assert.deepEqual(writes, ['update 3 0/100 5.0s\n']);
    t += 1000;
    ph.update(10, '1 step');
    clock.tick();
    assert.equal(writes.length, 1, 'an update inside a quarter prints nothing by itself');
    t = 2 * PLAIN_EVERY_MS;
    ph.update(11, '1 step');
    assert.equal(writes[1], 'update 3 11/100 10.0s, about 81 s left  1 step\n');
    t = 3 * PLAIN_EVERY_MS;
    clock.tick();
    assert.equal(writes[2], 'update 3 11/100 15.0s, about 2 min 01 s left  1 step\n', 'the timer repeats the last update, its estimate moved on');
    ph.finish();
    t = 10 * PLAIN_EVERY_MS;
    clock.tick();
    assert.equal(writes.length, 4);
    assert.equal(writes[3], 'update 3 100/100 15.0s\n');
  });

  test('a terminal gets a bar redrawn in place, cleared before a full line; the timer moves its clock and its estimate', () => {
    const { writes, out } = sink(true);
    let t = 0;
    const clock = manualTicker();
    const p = new Progress(out, 'auto', () => t, clock.ticker);
    assert.equal(p.mode, 'bar');
    const ph = p.phase('update', 4);
    ph.update(1);
    t += 10;
    ph.update(2); // within the redraw interval: skipped
    t += 200;
    ph.update(3);
    p.line('warning: x');
    t += 1000;
    clock.tick();
    ph.finish();
    assert.equal(writes.length, 7);
    assert.equal(writes[0], '\r\x1b[2Kupdate [######..................] 1/4 0.0s');
    assert.equal(writes[1], '\r\x1b[2Kupdate [##################......] 3/4 0.2s, about 0 s left');
    assert.deepEqual(writes.slice(2, 4), ['\r\x1b[2K', 'warning: x\n']);
    assert.equal(writes[4], '\r\x1b[2Kupdate [##################......] 3/4 1.2s, about 0 s left');
    assert.equal(writes[5], '\r\x1b[2Kupdate [########################] 4/4 1.2s');
    assert.equal(writes[6], '\n');
  });

  test('durations read in seconds, minutes and seconds, minutes, hours', () => {
    assert.deepEqual([0, 89.4, 216, 599, 600, 5369, 5400, 7530].map(formatDuration), ['0 s', '89 s', '3 min 36 s', '9 min 59 s', '10 min', '89 min', '1 h 30 min', '2 h 06 min']);
    assert.equal(secondsLeft(10, 2, 8), 30, 'the pace so far, carried over what is left');
    assert.equal(secondsLeft(10, 0, 8), null);
    assert.equal(secondsLeft(10, 8, 8), null);
  });

  test('a new phase stops the timer of one left unfinished; none prints nothing and starts no timer', () => {
    const { writes, out } = sink(false);
    let t = 0;
    const clock = manualTicker();
    const p = new Progress(out, 'plain', () => t, clock.ticker);
    p.phase('reference 1', 8);
    const next = p.phase('update 1', 8);
    assert.equal(clock.running(), 1);
    t = PLAIN_EVERY_MS;
    clock.tick();
    assert.deepEqual(writes, ['update 1 0/8 5.0s\n']);
    next.finish();
    assert.equal(clock.running(), 0);

    const none = sink(false);
    const quietClock = manualTicker();
    const quiet = new Progress(none.out, 'none', () => t, quietClock.ticker).phase('x', 2);
    assert.equal(quietClock.running(), 0);
    quiet.update(2);
    quiet.finish();
    assert.deepEqual(none.writes, []);
  });
});
