// Stop strings over incrementally detokenised text: only the tail that the new text
// can complete is searched.

import type { Tokenizer } from '../tokenizer/tokenizer.ts';
import { IncrementalDetokenizer } from './detokenizer.ts';

export class StopStringWatcher {
  private readonly text: IncrementalDetokenizer;
  private readonly longest: number;

  constructor(
    tokenizer: Tokenizer,
    private readonly stops: readonly string[],
    skipSpecialTokens = false,
  ) {
    this.text = new IncrementalDetokenizer(tokenizer, skipSpecialTokens);
    this.longest = Math.max(0, ...stops.map((s) => s.length));
  }

  /**
   * Appends a token. When the text now contains a stop string, returns it and the text
   * up to and including its end; otherwise null.
   */
  push(id: number): { stop: string; text: string } | null {
    const from = Math.max(0, this.text.text.length - this.longest + 1);
    if (!this.text.push(id)) return null;
    const text = this.text.text;
    let best: { stop: string; end: number } | null = null;
    for (const stop of this.stops) {
      const at = text.indexOf(stop, from);
      if (at >= 0 && (!best || at + stop.length < best.end)) best = { stop, end: at + stop.length };
    }
    return best && { stop: best.stop, text: text.slice(0, best.end) };
  }
}
