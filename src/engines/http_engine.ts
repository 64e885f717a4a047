// The engine over HTTP: vLLM's OpenAI-compatible server or our `serve` (docs/PROTOCOLS.md
// section 5, docs/SERVING.md). Token ids go in and come back (return_token_ids), with
// each sampled token's log-prob (logprobs: 0, or N for top lists); scoring reads
// prompt_logprobs by token id. Every generation request is its own HTTP request
// (sampling settings and seeds are per request in the API), sent concurrently up to a
// limit so the server batches them. vLLM must run with --logprobs-mode
// processed_logprobs for the log-probs to be those of the sampling distribution.
// Weight sync: LoRA adapters through vLLM's adapter endpoints, full weights through
// its development RPC endpoint (the server started with VLLM_SERVER_DEV_MODE=1).
// Connection failures and 5xx answers are retried until a deadline (minutes by
// default, as a restarting vLLM needs); whoever keeps the server's weights current
// hooks in before each retry (src/fleet/).

import type { Engine, GenerationRequest, GenerationResult, ScoreRequest, TopLogprob, WeightSync } from './engine.ts';
import { callServer, EngineHttpError, type AttemptFailure, type RetryOptions } from '../net/http_call.ts';
import { mapLimit } from '../util/map_limit.ts';

export interface HttpEngineOptions {
  /** Server address, e.g. http://127.0.0.1:8000 (a trailing /v1 is accepted). */
  baseUrl: string;
  /** The served model for requests that name none (vLLM's --served-model-name); default: the base model /v1/models lists, once `describe` has run. */
  model?: string;
  /** Sent as "Authorization: Bearer <key>" (vLLM's --api-key). */
  apiKey?: string;
  /** Deadline per HTTP request (default 10 minutes: a long batch can take that). */
  timeoutMs?: number;
  /** Retries on connection failures and 5xx (default: as many as fit in deadlineMs). */
  retries?: number;
  /** How long a request keeps retrying a server that does not answer (default 5 minutes). */
  deadlineMs?: number;
  backoffMs?: number;
  maxBackoffMs?: number;
  retryTimeouts?: boolean;
  /** Requests in flight at once (default 64). */
  concurrency?: number;
}

/** One entry of GET /v1/models: the base model (parent null) or an adapter on it. */
export interface ServedModelCard {
  id: string;
  /** Where the weights came from: the base model's path or name, an adapter's directory. */
  root: string | null;
  parent: string | null;
  /** The longest prompt plus completion the server takes (vLLM's --max-model-len); given for base models. */
  maxModelLen: number | null;
}

export const HTTP_ENGINE_DEFAULTS = { timeoutMs: 600_000, deadlineMs: 300_000, backoffMs: 500, maxBackoffMs: 8000, concurrency: 64 } as const;

const isObject = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === 'object' && !Array.isArray(v);

export class HttpEngine implements Engine, WeightSync {
  readonly name: string;
  /** The server's address without a trailing /v1. */
  readonly base: string;
  private readonly retry: RetryOptions;
  private model: string | undefined;
  /** The server's max_model_len, once `describe` has read it. */
  contextLength: number | undefined;
  /**
   * Awaited before a generation or scoring request is sent again after a connection
   * failure or a 5xx: the server may have restarted on other weights. It may throw to
   * stop the retries.
   */
  beforeRetry: ((failure: AttemptFailure) => Promise<void> | void) | undefined;
  /** Called before any request is sent again (progress lines while a server is away). */
  onWait: ((failure: AttemptFailure) => void) | undefined;
  /** How long the next request keeps retrying, when it depends on more than this engine (other servers could take the work). */
  patience: (() => number) | undefined;

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
    this.model = opts.model;
    const d = HTTP_ENGINE_DEFAULTS;
    this.retry = {
      timeoutMs: opts.timeoutMs ?? d.timeoutMs,
      retries: opts.retries ?? Infinity,
      deadlineMs: opts.deadlineMs ?? d.deadlineMs,
      backoffMs: opts.backoffMs ?? d.backoffMs,
      maxBackoffMs: opts.maxBackoffMs ?? d.maxBackoffMs,
      retryTimeouts: opts.retryTimeouts ?? false,
    };
  }

  /** The served model requests name when they name none. */
  get servedModel(): string {
    if (this.model === undefined) throw new Error(`${this.name}: no model name to ask for (set rollout.model, or let the preflight read /v1/models)`);
    return this.model;
  }

  /**
   * A request. Generation and scoring (`guarded`) retry every 5xx, since a server whose
   * engine died answers 500 until it is back, and run the beforeRetry hook between
   * attempts; other requests retry only what a restart or a proxy answers (502-504),
   * since a 500 from a weight reload says the same the next time.
   */
  call(method: 'GET' | 'POST', path: string, body?: unknown, opts: { guarded?: boolean; once?: boolean; timeoutMs?: number } = {}): Promise<unknown> {
    const beforeRetry = async (f: AttemptFailure) => {
      this.onWait?.(f);
      if (opts.guarded) await this.beforeRetry?.(f);
    };
    const base = { ...this.retry, deadlineMs: this.patience?.() ?? this.retry.deadlineMs, timeoutMs: opts.timeoutMs ?? this.retry.timeoutMs };
    const retry: RetryOptions = opts.once
      ? { ...base, retries: 0 }
      : opts.guarded ? { ...base, beforeRetry } : { ...base, beforeRetry, retryStatus: (s) => s >= 502 && s <= 504 };
    return callServer({ url: `${this.base}${path}`, method, body, apiKey: this.opts.apiKey }, retry);
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
    const model = opts.model ?? this.servedModel;
    return mapLimit(requests, this.opts.concurrency ?? HTTP_ENGINE_DEFAULTS.concurrency, (r) => this.generateOne(r, model));
  }

  /** One generation request, as generate sends each. */
  async generateOne(r: GenerationRequest, model: string): Promise<GenerationResult> {
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
    const c = this.firstChoice(await this.call('POST', path, body, { guarded: true }), path);
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
    const model = opts.model ?? this.servedModel;
    return mapLimit(requests, this.opts.concurrency ?? HTTP_ENGINE_DEFAULTS.concurrency, (r) => this.scoreOne(r, model, opts.temperature ?? 1));
  }

  /** One scoring request, as score sends each. */
  async scoreOne(r: ScoreRequest, model: string, temperature = 1, opts: { guarded?: boolean } = {}): Promise<number[]> {
    if (r.completionIds.length === 0) return [];
    const ids = [...r.promptIds, ...r.completionIds];
    const path = '/v1/completions';
    const body = { model, prompt: ids, max_tokens: 1, temperature, prompt_logprobs: 0, return_tokens_as_token_ids: true };
    const c = this.firstChoice(await this.call('POST', path, body, { guarded: opts.guarded ?? true }), path);
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
  }

  /** GET /health: resolves when the server answers 2xx. */
  async health(): Promise<void> {
    await this.call('GET', '/health');
  }

  /** Names of the served models (base and adapters). */
  async models(): Promise<string[]> {
    return (await this.modelCards()).map((m) => m.id);
  }

  /** GET /v1/models as cards: the base model first. */
  async modelCards(): Promise<ServedModelCard[]> {
    const answer = await this.call('GET', '/v1/models');
    if (!isObject(answer) || !Array.isArray(answer.data)) throw this.malformed('/v1/models', 'expected {"data": [...]}');
    const cards = answer.data.map((m, i): ServedModelCard => {
      if (!isObject(m) || typeof m.id !== 'string') throw this.malformed('/v1/models', `data[${i}] has no "id"`);
      const len = m.max_model_len;
      return {
        id: m.id,
        root: typeof m.root === 'string' ? m.root : null,
        parent: typeof m.parent === 'string' ? m.parent : null,
        maxModelLen: typeof len === 'number' && Number.isInteger(len) && len > 0 ? len : null,
      };
    });
    return [...cards.filter((c) => c.parent === null), ...cards.filter((c) => c.parent !== null)];
  }

  /**
   * Reads the served models: the base model's name becomes the default for requests
   * that name none (when none was given) and its max_model_len the engine's context.
   */
  async describe(): Promise<ServedModelCard[]> {
    const cards = await this.modelCards();
    const base = cards.find((c) => c.parent === null);
    if (!base) throw this.malformed('/v1/models', 'no base model (every entry has a "parent")');
    this.model ??= base.id;
    if (base.maxModelLen !== null) this.contextLength = base.maxModelLen;
    return cards;
  }

  /** POST /tokenize: the server's token ids for `text` (no special tokens added). */
  async tokenize(text: string): Promise<number[]> {
    const answer = await this.call('POST', '/tokenize', { prompt: text, add_special_tokens: false });
    if (!isObject(answer) || !Array.isArray(answer.tokens) || !answer.tokens.every((t) => Number.isInteger(t))) throw this.malformed('/tokenize', 'expected {"tokens": [ids]}');
    return answer.tokens as number[];
  }

  /**
   * Whether the server has a POST route: an empty body is refused as a bad request by a
   * route that exists and changes nothing, and a missing one answers 404.
   */
  async hasRoute(path: string): Promise<boolean> {
    try {
      await this.call('POST', path, {}, { once: true });
      return true;
    } catch (e) {
      if (e instanceof EngineHttpError && e.status === 404) return false;
      if (e instanceof EngineHttpError && e.status !== null && e.status < 500 && e.status !== 401 && e.status !== 403) return true;
      throw e;
    }
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
      if (e instanceof EngineHttpError && /unexpected keyword argument 'weights_path'/.test(e.message)) {
        throw new EngineHttpError(`${e.message} (this vLLM's reload_weights takes no weights_path: full-weight sync needs vLLM 0.16 or later, or train with LoRA; docs/SERVING.md)`, e.status, e.url, e.kind);
      }
      throw e;
    }
    await this.call('POST', '/reset_prefix_cache');
  }
}
