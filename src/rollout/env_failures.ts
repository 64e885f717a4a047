// The one rule for episodes that fail in their environment (a server that errs,
// times out or cannot be reached; a retriever behind it that fails): each such episode
// yields no samples (agent_loop.ts), and a rollout in which too many failed stops the
// run. Every episode failing stops it whatever the threshold, since nothing was
// measured; otherwise it stops once the failed share passes `maxShare`
// (env.maxFailedShare, default 0.2). The caller checks right after the rollout, before
// anything trains on it or is saved, so a stopped run keeps its last checkpoint as it
// was. Environments report failures by throwing from create, reset or step; nothing
// else needs to know this rule.

/** One rollout's episodes and how many of them failed in the environment. */
export interface EnvFailureCount {
  episodes: number;
  failed: number;
  /** The first failed episode's error (the server's message), or null. */
  firstError: string | null;
}

/** A rollout failed in its environment past what the run accepts; its message names the count, the threshold and the server's first error. */
export class EnvFailureError extends Error {
  override name = 'EnvFailureError';
  constructor(
    message: string,
    readonly count: EnvFailureCount,
  ) {
    super(message);
  }
}

/** The failures among a rollout's trajectories (records with an `error`). */
export function countEnvFailures(trajectories: readonly { error?: string }[]): EnvFailureCount {
  const failed = trajectories.filter((t) => t.error !== undefined);
  return { episodes: trajectories.length, failed: failed.length, firstError: failed[0]?.error ?? null };
}

const percent = (share: number) => `${Math.round(share * 1000) / 10}%`;

/**
 * Throws EnvFailureError when every episode of `what` ("iteration 3", "validation at
 * iteration 5") failed, or more than `maxShare` of them did; returns the count otherwise.
 */
export function checkEnvFailures(count: EnvFailureCount, maxShare: number, what: string): EnvFailureCount {
  if (!(maxShare >= 0 && maxShare <= 1)) throw new RangeError(`checkEnvFailures: maxShare must be in [0, 1], got ${maxShare}`);
  if (count.failed === 0) return count;
  const share = count.failed / count.episodes;
  if (count.failed === count.episodes) {
    throw new EnvFailureError(`${what}: every one of its ${count.episodes} episodes failed in the environment; the server's first error: ${count.firstError}`, count);
  }
  if (share > maxShare) {
    throw new EnvFailureError(
      `${what}: ${count.failed} of ${count.episodes} episodes (${percent(share)}) failed in the environment, more than env.maxFailedShare ` +
        `(${percent(maxShare)}); the first error: ${count.firstError}`,
      count,
    );
  }
  return count;
}
