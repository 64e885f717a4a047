// Streaming answers ("stream": true) as OpenAI and vLLM frame them: server-sent events,
// one `data: <json>` chunk per event, an error as a chunk of its own, and
// `data: [DONE]` at the end. Each choice's text goes out as deltas of its incremental
// detokenisation; while a stop string could still be forming, its possible start is
// held back, so a stop string left out of the output is never half sent.

import type { ServerResponse } from '../net/http_server.ts';
import type { Tokenizer } from '../tokenizer/tokenizer.ts';
import { IncrementalDetokenizer } from '../engines/detokenizer.ts';
import type { GenerationRequest, GenerationResult } from '../engines/engine.ts';
import type { TokenEvent } from '../engines/local_engine.ts';
import type { PromptTokenStats } from '../engines/prompt_logprobs.ts';
import type { ApiError } from './http.ts';
import type { StreamOptions } from './sampling.ts';
import type { ScoredToken } from './text.ts';

export class SseWriter {
  private closed = false;

  constructor(private readonly res: ServerResponse) {
    res.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache', connection: 'keep-alive' });
    // A client that hangs up stops the writing, not the generation its batch shares.
    res.on('close', () => (this.closed = true));
  }

  send(chunk: unknown): void {
    if (!this.closed) this.res.write(`data: ${JSON.stringify(chunk)}\n\n`);
  }

  done(): void {
    if (this.closed) return;
    this.res.end('data: [DONE]\n\n');
    this.closed = true;
  }
}

/** The text deltas of one streamed choice. */
export class ChoiceText {
  private readonly text: IncrementalDetokenizer | null;
  private sent = 0;
  private readonly holdBack: number;

  constructor(
    tok: Tokenizer | null,
    private readonly opts: { skipSpecial: boolean; includeStop: boolean; stops: readonly string[] },
  ) {
    this.text = tok && new IncrementalDetokenizer(tok, opts.skipSpecial);
    this.holdBack = opts.includeStop ? 0 : Math.max(0, ...opts.stops.map((s) => s.length - 1));
  }

  /** The text token `id` adds to the choice; `result` on its last token settles the stops. */
  push(id: number, result?: GenerationResult): string {
    if (!this.text) return '';
    let end: number;
    if (!result) {
      this.text.push(id);
      end = this.text.text.length - this.holdBack;
    } else if (typeof result.stopReason === 'string') {
      // The engine's text ends with the stop string and is this same detokenisation.
      end = result.text.length - (this.opts.includeStop ? 0 : result.stopReason.length);
      this.text.push(id);
    } else {
      // A stop token's own text stays out unless asked for, as in the whole answer.
      if (result.finishReason !== 'stop' || this.opts.includeStop) this.text.push(id);
      end = this.text.text.length;
    }
    if (end <= this.sent) return '';
    const delta = this.text.text.slice(this.sent, end);
    this.sent = end;
    return delta;
  }
}

/** What a streamed endpoint writes: its chunk shapes. */
export interface ChunkFormat {
  /** The chunk that opens choice `index` (its role, or the echoed prompt); null: none. */
  start(index: number, stats: PromptTokenStats | null): Record<string, unknown> | null;
  /** A token's chunk; `result` on the choice's last token. */
  token(index: number, text: string, token: ScoredToken, result?: GenerationResult): Record<string, unknown>;
  /** The closing chunk of a choice that generated no token. */
  empty(index: number, result: GenerationResult): Record<string, unknown>;
  usage(promptTokens: number, completionTokens: number): Record<string, unknown>;
}

export interface StreamJob {
  requests: readonly GenerationRequest[];
  /** Choices per prompt: choice i belongs to prompt floor(i / n). */
  n: number;
  options: StreamOptions;
  texts: readonly ChoiceText[];
  /** Prompt log-probs per prompt, for echoed prompts' chunks. */
  promptStats: readonly PromptTokenStats[] | null;
  /** Runs the generation, reporting each accepted token. */
  run(onToken: (index: number, token: TokenEvent) => void): Promise<GenerationResult[]>;
  /** An error as the API answers it. */
  toApiError(e: unknown): ApiError;
}

/** Streams a generation to `res`; never throws (a failure is sent as an error chunk). */
export async function streamChoices(res: ServerResponse, job: StreamJob, format: ChunkFormat): Promise<void> {
  const out = new SseWriter(res);
  const promptTokens = job.requests.reduce((s, r, i) => (i % job.n === 0 ? s + r.promptIds.length : s), 0);
  let completionTokens = 0;
  const send = (chunk: Record<string, unknown>) => {
    if (job.options.continuousUsage) chunk.usage = format.usage(promptTokens, completionTokens).usage;
    out.send(chunk);
  };
  try {
    job.requests.forEach((_, i) => {
      const chunk = format.start(i, job.promptStats?.[Math.floor(i / job.n)] ?? null);
      if (chunk) send(chunk);
    });
    const results = await job.run((i, t) => {
      completionTokens++;
      const text = job.texts[i].push(t.id, t.result);
      send(format.token(i, text, { id: t.id, logprob: t.logprob, top: t.top }, t.result));
    });
    results.forEach((r, i) => {
      if (r.tokenIds.length === 0) send(format.empty(i, r));
    });
    if (job.options.includeUsage) out.send(format.usage(promptTokens, completionTokens));
  } catch (e) {
    out.send(job.toApiError(e).body);
  }
  out.done();
}
