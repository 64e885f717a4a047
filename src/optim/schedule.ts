// Learning-rate schedules: linear warmup, then constant, cosine or linear decay.

export interface ScheduleOptions {
  base: number;
  warmupSteps?: number;
  kind?: 'constant' | 'cosine' | 'linear';
  /** Steps of the whole run, warmup included (needed by cosine and linear). */
  totalSteps?: number;
  /** Where cosine and linear decay end. */
  minLr?: number;
}

/**
 * The learning rate of step `step` (0-based). Warmup climbs linearly as verl's
 * schedulers do (docs/ALGORITHMS.md section 1.6): step s < warmupSteps trains at
 * s / warmupSteps of the way from its start (0 for constant; minLr for the decaying
 * kinds, verl's min_lr_ratio) to base, so step 0 does not move the weights and step
 * warmupSteps is the first at base; decay then runs from base at step warmupSteps to
 * minLr at step totalSteps and stays there.
 */
export function lrAt(step: number, { base, warmupSteps = 0, kind = 'constant', totalSteps, minLr = 0 }: ScheduleOptions): number {
  if (!(Number.isInteger(step) && step >= 0)) throw new RangeError(`lrAt: step must be an integer >= 0, got ${step}`);
  if (!(Number.isInteger(warmupSteps) && warmupSteps >= 0)) throw new RangeError(`lrAt: warmupSteps must be an integer >= 0, got ${warmupSteps}`);
  if (step < warmupSteps) {
    const from = kind === 'constant' ? 0 : minLr;
    return from + ((base - from) * step) / warmupSteps;
  }
  if (kind === 'constant') return base;
  if (totalSteps === undefined || !(Number.isInteger(totalSteps) && totalSteps > warmupSteps)) {
    throw new RangeError(`lrAt: a ${kind} schedule needs an integer totalSteps > warmupSteps (${warmupSteps}), got ${totalSteps}`);
  }
  const progress = Math.min(1, (step - warmupSteps) / (totalSteps - warmupSteps));
  if (kind === 'cosine') return minLr + (base - minLr) * 0.5 * (1 + Math.cos(Math.PI * progress));
  if (kind === 'linear') return base + (minLr - base) * progress;
  throw new RangeError(`lrAt: unknown schedule kind "${kind as string}"`);
}
