// How long long work has left, said the same way everywhere (a phase's progress, an
// iteration's line, eval's episodes, compare's runs): the mean pace of the units done so
// far, carried over the units left. Early units pay for compiling kernels, so the first
// estimates run long; they settle as the work goes on.

/** Seconds left when `done` of `total` units took `elapsedSeconds`; null before the first unit, after the last, or with no time measured. */
export function secondsLeft(elapsedSeconds: number, done: number, total: number): number | null {
  if (!(done > 0) || done >= total || !(elapsedSeconds > 0) || !Number.isFinite(elapsedSeconds)) return null;
  return (elapsedSeconds / done) * (total - done);
}

/** "45 s", "3 min 36 s", "12 min", "2 h 05 min". */
export function formatDuration(seconds: number): string {
  const s = Math.max(0, Math.round(seconds));
  if (s < 90) return `${s} s`;
  if (s < 600) return `${Math.floor(s / 60)} min ${String(s % 60).padStart(2, '0')} s`;
  const minutes = Math.round(s / 60);
  if (minutes < 90) return `${minutes} min`;
  return `${Math.floor(minutes / 60)} h ${String(minutes % 60).padStart(2, '0')} min`;
}

/** "about 12 min left", or null when there is nothing to estimate. */
export function timeLeftText(elapsedSeconds: number, done: number, total: number): string | null {
  const left = secondsLeft(elapsedSeconds, done, total);
  return left === null ? null : `about ${formatDuration(left)} left`;
}
