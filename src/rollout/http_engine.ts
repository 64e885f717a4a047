// The engine over HTTP: vLLM's OpenAI-compatible server or our `serve` (docs/PROTOCOLS.md
// section 5, docs/SERVING.md). Token ids go in and come back (return_token_ids), with
// each sampled token's log-prob (logprobs: 0, or N for top lists); scoring reads
// prompt_logprobs by token id. Every generation request is its own HTTP request
// (sampling settings and seeds are per request in the API), sent concurrently up to a
// limit so the server batches them. vLLM must run with --logprobs-mode
// processed_logprobs for the log-probs to be those of the sampling distribution.
// Weight sync: LoRA adapters through vLLM's adapter endpoints, full weights through
// its development RPC endpoint (the server started with VLLM_SERVER_DEV_MODE=1).

import type { Engine, GenerationRequest, GenerationResult, ScoreRequest, TopLogprob, WeightSync } from './engine.ts';
import { callServer, EngineHttpError, type RetryOptions } from '../net/http_call.ts';

export interface HttpEngineOptions {
  /** Server address, e.g. http://127.0.0.1:8000 (a trailing /v1 is accepted). */
  baseUrl: string;
  /** The served model for requests that name none (vLLM's --served-model-name). */
  model: string;
  apiKey?: string;
  /** Deadline per HTTP request (default 10 minutes: a long batch can take that). */
  timeoutMs?: number;
  /** Retries on connection failures and 5xx (default 3). */
  retries?: number;
  backoffMs?: number;
  maxBackoffMs?: number;
  retryTimeouts?: boolean;
  /** Requests in flight at once (default 64). */
  concurrency?: number;
}

const isObject = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === 'object' && !Array.isArray(v);

// fn over items with at most `limit` calls in flight; after a failure no new call starts.
async function mapLimit<T, R>(items: readonly T[], limit: number, fn: (item: T, i: number) => Promise<R>): Promise<R[]> {
  const out: R[] = new Array(items.length);
  let next = 0;
  let failed = false;
  const worker = async () => {
    while (next < items.length && !failed) {
      const i = next++;
      try {
        out[i] = await fn(items[i], i);
      } catch (e) {
        failed = true;
        throw e;
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  return out;
}

export class HttpEngine implements Engine, WeightSync {
  readonly name: string;
  private readonly base: string;
  private readonly retry: RetryOptions;

  constructor(private readonly opts: HttpEngineOptions) {
    let url: URL;
    try {
      url = new URL(opts.baseUrl);
    } catch {
      throw new EngineHttpError(`HttpEngine: "${opts.baseUrl}" is not a URL`, null, opts.baseUrl);
    }
    if (opts.concurrency !== undefined && !(Number.isInteger(opts.concurrency) && opts.concurrency >= 1)) {
      throw new RangeError(`HttpEngine: concurrency must be a positive integer, got ${opts.concurrency}`);
    }
    this.base = url.href.replace(/\/+$/, '').replace(/\/v1$/, '');
    this.name = `http:${this.base}`;
    this.retry = {
      timeoutMs: opts.timeoutMs ?? 600_000,
      retries: opts.retries ?? 3,
      backoffMs: opts.backoffMs ?? 500,
      maxBackoffMs: opts.maxBackoffMs ?? 8000,
      retryTimeouts: opts.retryTimeouts ?? false,
    };
  }

  private call(method: 'GET' | 'POST', path: string, body?: unknown): Promise<unknown> {
    return callServer({ url: `${this.base}${path}`, method, body, apiKey: this.opts.apiKey }, this.retry);
  }

  private malformed(path: string, what: string): EngineHttpError {
    return new EngineHttpError(`POST ${this.base}${path}: malformed answer: ${what}`, null, `${this.base}${path}`);
  }

  private firstChoice(answer: unknown, path: string): Record<string, unknown> {
    if (!isObject(answer) || !Array.isArray(answer.choices) || answer.choices.length !== 1 || !isObject(answer.choices[0])) {
      throw this.malformed(path, `expected {"choices": [one choice]}, got ${JSON.stringify(answer).slice(0, 200)}`);
    }
    return answer.choices[0];
  }

  async generate(requests: readonly GenerationRequest[], opts: { model?: string } = {}): Promise<GenerationResult[]> {
    const model = opts.model ?? this.opts.model;
    return mapLimit(requests, this.opts.concurrency ?? 64, (r) => this.generateOne(r, model));
  }

  private async generateOne(r: GenerationRequest, model: string): Promise<GenerationResult> {
    const p = r.params;
    const body: Record<string, unknown> = {
      model,
      prompt: [...r.promptIds],
      max_tokens: p.maxTokens,
      n: 1,
      temperature: p.temperature,
      top_p: p.topP,
      top_k: p.topK > 0 ? p.topK : -1,
      include_stop_str_in_output: true,
      logprobs: p.logprobs ?? 0,
      return_token_ids: true,
      return_tokens_as_token_ids: true,
      skip_special_tokens: p.skipSpecialTokens ?? false,
    };
    if (p.seed !== undefined) body.seed = p.seed;
    if (p.stop?.length) body.stop = p.stop;
    if (p.stopTokenIds?.length) body.stop_token_ids = p.stopTokenIds;
    if (p.ignoreEos) body.ignore_eos = true;
    const path = '/v1/completions';
    const c = this.firstChoice(await this.call('POST', path, body), path);
    const lp = c.logprobs;
    if (!isObject(lp) || !Array.isArray(lp.token_logprobs)) throw this.malformed(path, 'choice has no logprobs.token_logprobs (was "logprobs": 0 ignored?)');
    const logprobs = lp.token_logprobs;
    let tokenIds = c.token_ids;
    // Servers without return_token_ids still name each token "token_id:<id>" with return_tokens_as_token_ids.
    if (tokenIds === undefined && Array.isArray(lp.tokens)) tokenIds = lp.tokens.map((t) => (typeof t === 'string' && /^token_id:\d+$/.test(t) ? Number(t.slice(9)) : t));
    if (!Array.isArray(tokenIds) || !tokenIds.every((t) => Number.isInteger(t) && t >= 0)) throw this.malformed(path, 'choice has no token_ids (the server ignored "return_token_ids")');
    if (!logprobs.every((x) => typeof x === 'number')) throw this.malformed(path, 'logprobs.token_logprobs holds non-numbers');
    if (logprobs.length !== tokenIds.length) throw this.malformed(path, `${tokenIds.length} token ids but ${logprobs.length} log-probs`);
    if (c.finish_reason !== 'stop' && c.finish_reason !== 'length') throw this.malformed(path, `finish_reason ${JSON.stringify(c.finish_reason)}`);
    const out: GenerationResult = {
      tokenIds: tokenIds as number[],
      logprobs: logprobs as number[],
      finishReason: c.finish_reason,
      text: typeof c.text === 'string' ? c.text : '',
    };
    if (typeof c.stop_reason === 'string' || typeof c.stop_reason === 'number') out.stopReason = c.stop_reason;
    if (p.logprobs) out.topLogprobs = this.topLists(lp.top_logprobs, tokenIds.length, p.logprobs, path);
    return out;
  }

  /** The N most likely of each step's top_logprobs dict (keyed "token_id:<id>"; it may also hold the sampled token). */
  private topLists(v: unknown, steps: number, n: number, path: string): TopLogprob[][] {
    if (!Array.isArray(v) || v.length !== steps) throw this.malformed(path, `logprobs.top_logprobs should list ${steps} entries, got ${JSON.stringify(v)?.slice(0, 100)}`);
    return v.map((entry, t) => {
      if (!isObject(entry)) throw this.malformed(path, `logprobs.top_logprobs[${t}] is not an object`);
      const list = Object.entries(entry).map(([name, logprob]) => {
        const m = /^token_id:(\d+)$/.exec(name);
        if (!m || typeof logprob !== 'number') throw this.malformed(path, `logprobs.top_logprobs[${t}] has ${JSON.stringify(name)}: ${JSON.stringify(logprob)} (was "return_tokens_as_token_ids" ignored?)`);
        return { id: Number(m[1]), logprob };
      });
      return list.sort((a, b) => b.logprob - a.logprob || a.id - b.id).slice(0, n);
    });
  }

  /**
   * Log-probs of each completion after its prompt, from prompt_logprobs (one token is
   * generated and ignored). At temperature T our server scores under softmax(logits / T);
   * vLLM's prompt log-probs may not apply T, so compare T != 1 scores with care.
   */
  async score(requests: readonly ScoreRequest[], opts: { model?: string; temperature?: number } = {}): Promise<number[][]> {
    const model = opts.model ?? this.opts.model;
    return mapLimit(requests, this.opts.concurrency ?? 64, async (r) => {
      if (r.completionIds.length === 0) return [];
      const ids = [...r.promptIds, ...r.completionIds];
      const path = '/v1/completions';
      const body = { model, prompt: ids, max_tokens: 1, temperature: opts.temperature ?? 1, prompt_logprobs: 0, return_tokens_as_token_ids: true };
      const c = this.firstChoice(await this.call('POST', path, body), path);
      const entries = c.prompt_logprobs;
      if (!Array.isArray(entries) || entries.length !== ids.length) {
        throw this.malformed(path, `prompt_logprobs should list ${ids.length} entries, got ${Array.isArray(entries) ? entries.length : JSON.stringify(entries)?.slice(0, 100)}`);
      }
      return r.completionIds.map((id, k) => {
        const at = r.promptIds.length + k;
        const entry = entries[at];
        const e = isObject(entry) ? entry[String(id)] : undefined;
        if (!isObject(e) || typeof e.logprob !== 'number') throw this.malformed(path, `prompt_logprobs[${at}] has no log-prob for token id ${id}`);
        return e.logprob;
      });
    });
  }

  /** GET /health: resolves when the server answers 2xx. */
  async health(): Promise<void> {
    await this.call('GET', '/health');
  }

  /** Names of the served models (base and adapters). */
  async models(): Promise<string[]> {
    const answer = await this.call('GET', '/v1/models');
    if (!isObject(answer) || !Array.isArray(answer.data)) throw this.malformed('/v1/models', 'expected {"data": [...]}');
    return answer.data.map((m) => (isObject(m) && typeof m.id === 'string' ? m.id : String(m)));
  }

  async loadLoraAdapter(name: string, path: string): Promise<void> {
    await this.call('POST', '/v1/load_lora_adapter', { lora_name: name, lora_path: path });
  }

  async unloadLoraAdapter(name: string): Promise<void> {
    await this.call('POST', '/v1/unload_lora_adapter', { lora_name: name });
  }

  /**
   * Loads a full Hugging Face checkpoint directory (readable by the server) into the
   * served model in place: vLLM's workers reload their weights from that path through
   * the RPC endpoint, then the prefix cache, which holds keys and values computed with
   * the old weights, is dropped.
   */
  async reloadWeights(path: string): Promise<void> {
    try {
      await this.call('POST', '/collective_rpc', { method: 'reload_weights', kwargs: { weights_path: path } });
    } catch (e) {
      if (e instanceof EngineHttpError && e.status === 404) {
        throw new EngineHttpError(`${e.message} (the server has no /collective_rpc: start vLLM with VLLM_SERVER_DEV_MODE=1 for full-weight sync, or train with LoRA)`, 404, e.url);
      }
      throw e;
    }
    await this.call('POST', '/reset_prefix_cache');
  }
}
