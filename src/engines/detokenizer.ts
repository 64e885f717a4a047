// Incremental detokenisation: the text of a growing token sequence, appended a piece
// at a time. Each new token's text is added once it decodes to whole characters
// (byte-level tokens can split a UTF-8 character), and what was added is never taken
// back, so pieces can be streamed as they come.

import type { Tokenizer } from '../tokenizer/tokenizer.ts';

export class IncrementalDetokenizer {
  private readonly ids: number[] = [];
  private prefixOffset = 0;
  private readOffset = 0;
  /** Everything added so far. */
  text = '';

  constructor(
    private readonly tokenizer: Tokenizer,
    private readonly skipSpecialTokens = false,
  ) {}

  /** Appends a token; returns the text it added ('' while a character is incomplete). */
  push(id: number): string {
    this.ids.push(id);
    const opts = { skipSpecialTokens: this.skipSpecialTokens };
    // Decoding from a token before the new ones keeps spaces and merges a tokenizer
    // makes at token boundaries.
    const before = this.tokenizer.decode(this.ids.slice(this.prefixOffset, this.readOffset), opts);
    const now = this.tokenizer.decode(this.ids.slice(this.prefixOffset), opts);
    // A trailing U+FFFD is an incomplete character: wait for the token that completes it.
    if (now.length <= before.length || now.endsWith('\uFFFD')) return '';
    const piece = now.slice(before.length);
    this.text += piece;
    this.prefixOffset = this.readOffset;
    this.readOffset = this.ids.length;
    return piece;
  }
}
