// Whether a process of this machine still runs, for files that name their writer's pid
// (a run's lock, a checkpoint being built).

/** True when process `pid` exists on this machine (one owned by another user counts). */
export function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'EPERM';
  }
}
