// Dispatch overhead: the cost of one small dispatch recorded among many in one
// submit, the host's share of it (recording alone, nothing submitted while timed), and
// a submit-and-wait round trip.

import * as ew from '../kernels/elementwise.ts';
import type { Runtime } from '../gpu/runtime.ts';
import { timeGpu, timeRecording } from './timing.ts';

export async function benchDispatch(rt: Runtime): Promise<object[]> {
  const buf = rt.pool.acquire(1024 * 4);
  const out = rt.pool.acquire(1024 * 4);
  const count = 1000;
  const batched = await timeGpu(rt, () => {
    for (let i = 0; i < count; i++) ew.unary(rt, 'neg', buf, out, 1024);
  });
  const recording = await timeRecording(rt, () => {
    for (let i = 0; i < count; i++) ew.unary(rt, 'neg', buf, out, 1024);
  });
  const roundTrip = await timeGpu(rt, () => ew.unary(rt, 'neg', buf, out, 1024), { iters: 21 });
  rt.pool.release(buf);
  rt.pool.release(out);
  return [
    { kind: 'dispatch', what: 'per dispatch, batched', us: (batched * 1000) / count },
    { kind: 'dispatch', what: 'per dispatch, host recording only', us: (recording * 1000) / count },
    { kind: 'dispatch', what: 'submit and wait round trip', us: roundTrip * 1000 },
  ];
}
