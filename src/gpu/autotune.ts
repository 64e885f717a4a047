// Choices measured on this device once per key and kept for the runtime's life, as
// Burn's autotune does, for launchers whose fastest variant depends on the GPU more
// than constants fitted to one machine can say. Recording is synchronous and a
// measurement needs the GPU's answer, so a launcher that finds no winner for its key
// runs its default variant and queues a measurement; the runtime runs the queue the
// next time it waits for the GPU to run dry (Runtime.sync, Runtime.read), after the
// work waited for, so the candidates are timed with nothing else in flight.

/** Measures the candidates of one key and returns the name of the fastest. */
export type Measurement = () => Promise<string>;

export class Autotune {
  private winners = new Map<string, string>();
  private queued = new Map<string, Measurement>();
  private running = false;
  /** Measurements run so far. */
  measured = 0;

  /** The fastest candidate measured for `key`, if it has been. */
  winner(key: string): string | undefined {
    return this.winners.get(key);
  }

  /** Queues `measure` for `key` unless the key has a winner or a queued measurement already. */
  queue(key: string, measure: Measurement): void {
    if (!this.winners.has(key) && !this.queued.has(key)) this.queued.set(key, measure);
  }

  /** Measurements waiting to run. */
  get pending(): number {
    return this.queued.size;
  }

  /**
   * Runs the queued measurements one by one, keeping each winner. Measurements wait for
   * the GPU themselves, and a wait they start does not start this again.
   */
  async runQueued(): Promise<void> {
    if (this.running) return;
    this.running = true;
    try {
      for (const [key, measure] of this.queued) {
        this.queued.delete(key);
        this.winners.set(key, await measure());
        this.measured++;
      }
    } finally {
      this.running = false;
    }
  }
}
