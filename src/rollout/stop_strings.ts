// Incremental detokenisation for stop strings: each new token's text is appended as
// soon as it decodes to whole characters (byte-level tokens can split a UTF-8
// character), and only the tail that the new text can complete is searched.

import type { Tokenizer } from '../models/tokenizer.ts';

export class StopStringWatcher {
  private readonly ids: number[] = [];
  private prefixOffset = 0;
  private readOffset = 0;
  private text = '';
  private readonly longest: number;

  constructor(
    private readonly tokenizer: Tokenizer,
    private readonly stops: readonly string[],
    private readonly skipSpecialTokens = false,
  ) {
    this.longest = Math.max(0, ...stops.map((s) => s.length));
  }

  /**
   * Appends a token. When the text now contains a stop string, returns it and the text
   * up to and including its end; otherwise null.
   */
  push(id: number): { stop: string; text: string } | null {
    this.ids.push(id);
    const opts = { skipSpecialTokens: this.skipSpecialTokens };
    const before = this.tokenizer.decode(this.ids.slice(this.prefixOffset, this.readOffset), opts);
    const now = this.tokenizer.decode(this.ids.slice(this.prefixOffset), opts);
    // A trailing U+FFFD is an incomplete character: wait for the token that completes it.
    if (now.length <= before.length || now.endsWith('\uFFFD')) return null;
    const from = Math.max(0, this.text.length - this.longest + 1);
    this.text += now.slice(before.length);
    this.prefixOffset = this.readOffset;
    this.readOffset = this.ids.length;
    let best: { stop: string; end: number } | null = null;
    for (const stop of this.stops) {
      const at = this.text.indexOf(stop, from);
      if (at >= 0 && (!best || at + stop.length < best.end)) best = { stop, end: at + stop.length };
    }
    return best && { stop: best.stop, text: this.text.slice(0, best.end) };
  }
}
