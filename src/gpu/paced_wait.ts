// Waiting for the GPU without spinning the event loop.
//
// Dawn's Node binding (dawn.node, under Node and Bun) learns that GPU work finished by
// polling: while any of its promises is pending it queues a setImmediate callback that
// polls and queues the next one, a fresh native function each turn. A 100 ms wait is
// tens of thousands of turns at full speed on one core, and each turn leaves small
// blocks that V8's collector frees in batches into glibc's fast bins. The next large
// malloc merges them all (malloc_consolidate): on the H200 host, a 6-16 ms stall inside
// the first beginComputePass after about one 100 ms wait in four, all of it in that
// libc routine by V8's tick profiler, and none with the fast bins turned off
// (GLIBC_TUNABLES=glibc.malloc.mxfast=0; docs/PERFORMANCE.md section 3). That was
// under Node; under Bun the stall did not occur in 80 such waits, and the pacing
// still keeps a long wait from burning a core.
//
// While paced waits are pending and even the newest has lasted its `spinMs`, each
// event-loop turn sleeps its `napMs` (Atomics.wait; both from the runtime's
// policy.pacing), so the binding polls about ten thousand times a second instead of
// hundreds of thousands. Shorter waits spin: a decoding loop reads step t back while step t + 1's readback is already
// pending; napping whenever the older of the two had lasted 1 ms took batch-1 decoding
// from 345 to 175-220 tokens/s on the H200.
// A finished wait is seen at most one nap late. Where there is no setImmediate
// (browsers, Deno's own WebGPU) or the thread may not block, it is a plain await.

import type { Pacing } from './kernel_policy.ts';

type Immediate = (fn: () => void) => unknown;

const setImmediateFn = (globalThis as { setImmediate?: Immediate }).setImmediate;
let napCell: Int32Array | null | undefined;

/** Sleeps the thread for `ms`, or returns false where it may not block. */
function nap(ms: number): boolean {
  if (napCell === undefined) {
    try {
      napCell = new Int32Array(new SharedArrayBuffer(4));
      Atomics.wait(napCell, 0, 0, 0);
    } catch {
      napCell = null;
    }
  }
  if (!napCell) return false;
  Atomics.wait(napCell, 0, 0, ms);
  return true;
}

interface Wait {
  since: number;
  pacing: Pacing;
}

/** The paced waits now pending. */
const pending = new Set<Wait>();
let pacerRunning = false;

/** Counts of what the pacer did, for tests and profiling. */
export const pacerStats = { turns: 0, naps: 0 };

/** The most recently started pending wait (pending is not empty). */
function newestWait(): Wait {
  let newest: Wait | undefined;
  for (const w of pending) if (!newest || w.since > newest.since) newest = w;
  return newest!;
}

function startPacer(): void {
  if (pacerRunning || !setImmediateFn) return;
  pacerRunning = true;
  const turn = () => {
    if (pending.size === 0) {
      pacerRunning = false;
      return;
    }
    pacerStats.turns++;
    const newest = newestWait();
    if (performance.now() - newest.since >= newest.pacing.spinMs && nap(newest.pacing.napMs)) pacerStats.naps++;
    setImmediateFn(turn);
  };
  setImmediateFn(turn);
}

/** Awaits `p`, a promise settled by the GPU, pacing the event loop by `pacing` while it is pending. */
export async function pacedWait<T>(p: Promise<T>, pacing: Pacing): Promise<T> {
  const wait = { since: performance.now(), pacing };
  pending.add(wait);
  startPacer();
  try {
    return await p;
  } finally {
    pending.delete(wait);
  }
}
