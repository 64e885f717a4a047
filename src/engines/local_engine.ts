// The local WebGPU engine: batched sampling with the KV cache on any CausalLM
// (Qwen2/Qwen3, Qwen3.5).
//
// A request list is sorted by prompt length and cut into batches of at most maxBatch
// rows and, given maxBatchBytes, no more rows than their KV cache (as long as the
// batch's longest prompt and response) and sampling logits fit in. Each batch is
// left-padded into one prefill (of its distinct prompts: rows
// asking the same prompt, a group's samples of it, copy its cache row and logits),
// then decodes one token per step for all rows at once, in chunks of steps between
// readbacks (rt.policy.decode stepsPerReadback): each step samples on the GPU (the
// sampleStep op), which also counts each row's tokens, checks its stop ids and token
// limit, and marks it done, so a finished row stops sampling and writing at once while
// the others go on; the ids and positions of a step stay on the GPU as the next step's
// input. One readback per chunk brings the chunk's ids and log-probs back, and the
// host records the next chunk before awaiting it, so the GPU runs one chunk while the
// host records the next: the GPU's rows carry their own progress from chunk to chunk,
// and the host's view lags by the chunk in flight. The host accepts a chunk's tokens
// in order and applies stop strings (rare, so checked here: a row they end stops on
// the GPU from the next chunk recorded, its later tokens dropped). Once at most half
// the rows are still generating, the finished ones leave the batch: the cache and the
// GPU's rows are cut to the live rows on the GPU, behind the chunk in flight, so a few
// long answers do not cost a full batch each step. The draw for a request's t-th token
// uses the uniform hash(seed, t) (computed on the GPU, bit for bit as util/random.ts
// uniformAt), so a seed reproduces its tokens whatever else shares the batch. A caller
// can follow each request's tokens as they are accepted (onToken, a chunk at a time),
// which is how the server streams.

import type { CausalLM, ModelCache } from '../models/causal_lm.ts';
import { lastLogits } from '../scoring/generate.ts';
import { HalfWeights } from '../models/half_weights.ts';
import { QwenModel } from '../models/qwen.ts';
import { fusesRows, headOnSkinny } from '../models/qwen_decode.ts';
import { decodeOnTensorCores } from '../tensor/ops/decode.ts';
import { scoreTails } from '../scoring/score.ts';
import type { Tokenizer } from '../tokenizer/tokenizer.ts';
import { noGrad } from '../tensor/autograd.ts';
import { decodeRows, disposeDecodeRows, finishDecodeRows, readSteps, sampleStep, takeDecodeRows, type DecodeRowState, type DecodeRows, type SampledTokens } from '../tensor/ops/sampling.ts';
import { keep, scope } from '../tensor/scope.ts';
import { tensor, type Tensor } from '../tensor/tensor.ts';
import { takeRows } from '../tensor/ops/create.ts';
import type { Engine, GenerationRequest, GenerationResult, SamplingParams, ScoreRequest, TopLogprob, WeightSync } from './engine.ts';
import { EngineRequestError } from './errors.ts';
import { decodeRowBytes } from '../memory/memory_plan.ts';
import { promptTokenStats, type PromptTokenStats } from './prompt_logprobs.ts';
import { randomSeed } from '../util/random.ts';
import { ServedModels } from './served_models.ts';
import { StopStringWatcher } from './stop_strings.ts';

export interface LocalEngineOptions {
  /** Needed for stop strings and `text`; without one, text is ''. */
  tokenizer?: Tokenizer | null;
  /** The base model's name in requests' `model` field (default 'local'). */
  name?: string;
  /** Where the base weights came from (listed by the server). */
  path?: string;
  /** Rows per generation batch (default 64). */
  maxBatch?: number;
  /**
   * Bytes a generation batch's KV cache and sampling logits may take (memory_plan.ts
   * decodeRowBytes a row, for the batch's longest prompt and response; the memory
   * plan's rolloutBatchBytes): a batch of short prompts holds more rows than one of long
   * ones. A single row is never refused by it (the memory plan refuses what cannot fit).
   * Default: no bound beyond maxBatch.
   */
  maxBatchBytes?: number;
  /** Tokens per scoring forward batch (default 8192). */
  scoreBatchTokens?: number;
  /**
   * Tokens a prefill forward takes at once (rows x prompt positions, default 16384): a
   * longer batch of prompts is prefilled in chunks of positions, each continuing the
   * cache, so its activations stay one chunk's whatever the prompts' length.
   */
  prefillTokens?: number;
  /**
   * Once this share of a batch's rows or fewer are still generating, the finished rows
   * are dropped from it (default 0.5; 0 keeps every row to the end).
   */
  compactBelow?: number;
}

/** A token as the engine accepts it; the request's last token also carries its result. */
export interface TokenEvent {
  id: number;
  logprob: number;
  /** The step's most likely tokens, when the request asked for them (params.logprobs). */
  top?: TopLogprob[];
  result?: GenerationResult;
}

export interface GenerateOptions {
  /** Serve with this adapter (or the base model by its name); default the base. */
  model?: string;
  /** Called with each accepted token of request `index`, in order, while the batch runs. */
  onToken?: (index: number, token: TokenEvent) => void;
}

interface Row {
  index: number;
  req: GenerationRequest;
  seed: number;
  stopIds: Set<number>;
  watcher: StopStringWatcher | null;
  tokens: number[];
  logprobs: number[];
  top: TopLogprob[][] | null;
  done: boolean;
  finishReason: 'stop' | 'length';
  stopReason?: string | number;
  stopText?: string;
}

/** What a LocalEngine has run so far (benchmarks read it). */
export interface LocalEngineUsage {
  /** Generation batches, each one prefill. */
  batches: number;
  /** Decoding steps after the prefills. */
  decodeSteps: number;
  /** Rows stepped (rows x steps, prefill steps included), and of those, rows not yet finished. */
  rowSteps: number;
  liveRowSteps: number;
  /** Chunks of steps between readbacks, and of those, the ones recorded while the one before was still running. */
  chunks: number;
  overlappedChunks: number;
  /** Time the host spent awaiting chunks' readbacks: what is left of the GPU's time after the host's recording. */
  readbackWaitMs: number;
  /** Prompt tokens of every row, and of those, the ones prefilled (a prompt several rows ask is prefilled once). */
  promptTokens: number;
  prefilledTokens: number;
}

/** A chunk of steps recorded and submitted: the rows it stepped, in order, and its readback. */
interface Chunk {
  batch: readonly Row[];
  steps: number;
  read: Promise<SampledTokens[]>;
}

/** Row b's top list of a step (its first n slots). */
function topOf(out: SampledTokens, b: number, n: number): TopLogprob[] {
  const at = b * out.topN;
  return Array.from({ length: n }, (_, j) => ({ id: out.topIds[at + j], logprob: out.topLogprobs[at + j] }));
}

/**
 * f16 copies of the weights `model`'s decode steps read (rt.policy.decode.weights),
 * packed from its weights as they are now (after the latest update or reload), for
 * one generate call: freed after it, so the update never holds them; null where its
 * steps read the f32 weights.
 */
function halfWeights(model: CausalLM): HalfWeights | null {
  const wanted = model.lmHead().storage.rt.policy.decode.weights === 'f16' && model instanceof QwenModel && fusesRows(model, 1);
  return wanted ? HalfWeights.of(model) : null;
}

/** Positions a batch's KV cache holds: its longest prompt and all but the last of its new tokens (the last is sampled, never fed back). */
const cacheLength = (longestPrompt: number, steps: number) => longestPrompt + steps - 1;

export class LocalEngine implements Engine, WeightSync {
  readonly name: string;

  /** The served model's context (max_position_embeddings). */
  get contextLength(): number {
    return this.models.config.maxPositions;
  }
  readonly usage: LocalEngineUsage = { batches: 0, decodeSteps: 0, rowSteps: 0, liveRowSteps: 0, chunks: 0, overlappedChunks: 0, readbackWaitMs: 0, promptTokens: 0, prefilledTokens: 0 };
  readonly models: ServedModels;
  readonly tokenizer: Tokenizer | null;
  readonly maxBatch: number;
  private readonly maxBatchBytes: number;
  private readonly scoreBatchTokens: number;
  private readonly prefillTokens: number;
  private readonly compactBelow: number;
  // GPU work runs one call at a time: tensor scopes are a stack and must not interleave.
  private queue: Promise<unknown> = Promise.resolve();

  constructor(model: CausalLM, opts: LocalEngineOptions = {}) {
    this.name = opts.name ?? 'local';
    this.models = new ServedModels(model, this.name, opts.path ?? null);
    this.tokenizer = opts.tokenizer ?? null;
    this.maxBatch = opts.maxBatch ?? 64;
    this.maxBatchBytes = opts.maxBatchBytes ?? Infinity;
    if (!(this.maxBatchBytes > 0)) throw new RangeError(`LocalEngine: maxBatchBytes must be a positive number of bytes, got ${opts.maxBatchBytes}`);
    this.scoreBatchTokens = opts.scoreBatchTokens ?? 8192;
    this.prefillTokens = opts.prefillTokens ?? 16384;
    if (!Number.isInteger(this.prefillTokens) || this.prefillTokens < 1) throw new RangeError(`LocalEngine: prefillTokens must be a positive integer, got ${opts.prefillTokens}`);
    this.compactBelow = opts.compactBelow ?? 0.5;
    if (!(this.compactBelow >= 0 && this.compactBelow < 1)) throw new RangeError(`LocalEngine: compactBelow must be in [0, 1), got ${opts.compactBelow}`);
    if (!Number.isInteger(this.maxBatch) || this.maxBatch < 1) throw new RangeError(`LocalEngine: maxBatch must be a positive integer, got ${opts.maxBatch}`);
  }

  private serial<T>(fn: () => Promise<T>): Promise<T> {
    const run = this.queue.then(fn);
    this.queue = run.catch(() => undefined);
    return run;
  }

  private get vocab(): number {
    return this.models.config.vocabSize;
  }

  private checkIds(ids: readonly number[], what: string): void {
    if (!Array.isArray(ids)) throw new EngineRequestError(`${what} must be an array of token ids`);
    ids.forEach((id, i) => {
      if (!Number.isInteger(id) || id < 0 || id >= this.vocab) {
        throw new EngineRequestError(`${what}[${i}] = ${JSON.stringify(id)} is not a token id in [0, ${this.vocab})`);
      }
    });
  }

  private checkRequest(r: GenerationRequest, i: number): void {
    const at = `request ${i}`;
    this.checkIds(r.promptIds as number[], `${at}: promptIds`);
    if (r.promptIds.length === 0) throw new EngineRequestError(`${at}: promptIds is empty`);
    const p: SamplingParams = r.params;
    if (!Number.isInteger(p.maxTokens) || p.maxTokens < 0) throw new EngineRequestError(`${at}: maxTokens must be an integer >= 0, got ${p.maxTokens}`);
    if (!Number.isFinite(p.temperature) || p.temperature < 0) throw new EngineRequestError(`${at}: temperature must be a finite number >= 0, got ${p.temperature}`);
    if (!(p.topP > 0 && p.topP <= 1)) throw new EngineRequestError(`${at}: topP must be in (0, 1], got ${p.topP}`);
    if (!Number.isInteger(p.topK) || p.topK < -1) throw new EngineRequestError(`${at}: topK must be an integer >= -1 (0 or -1: off), got ${p.topK}`);
    if (p.seed !== undefined && !Number.isSafeInteger(p.seed)) throw new EngineRequestError(`${at}: seed must be an integer, got ${p.seed}`);
    if (p.logprobs !== undefined && !(Number.isInteger(p.logprobs) && p.logprobs >= 0 && p.logprobs <= this.vocab)) {
      throw new EngineRequestError(`${at}: logprobs must be an integer in [0, ${this.vocab}], got ${p.logprobs}`);
    }
    if (p.stopTokenIds) this.checkIds(p.stopTokenIds, `${at}: stopTokenIds`);
    if (p.stop?.length) {
      if (p.stop.some((s) => typeof s !== 'string' || s === '')) throw new EngineRequestError(`${at}: stop strings must be non-empty strings`);
      if (!this.tokenizer) throw new EngineRequestError(`${at}: stop strings need a tokenizer, and this engine has none (pass one to LocalEngine)`);
    }
    const limit = this.models.config.maxPositions;
    if (r.promptIds.length + p.maxTokens > limit) {
      throw new EngineRequestError(`${at}: ${r.promptIds.length} prompt tokens + ${p.maxTokens} new tokens exceed the model's context of ${limit} tokens`);
    }
  }

  async generate(requests: readonly GenerationRequest[], opts: GenerateOptions = {}): Promise<GenerationResult[]> {
    requests.forEach((r, i) => this.checkRequest(r, i));
    return this.serial(async () => {
      const model = this.models.resolve(opts.model);
      const rows = requests.map((req, index) => this.newRow(req, index));
      const live = rows.filter((r) => !r.done).sort((a, b) => a.req.promptIds.length - b.req.promptIds.length);
      const half = live.length ? halfWeights(model) : null;
      try {
        for (let i = 0; i < live.length;) {
          const rows = this.batchRows(live, i);
          await this.runBatch(model, half, live.slice(i, i + rows), opts.onToken);
          i += rows;
        }
      } finally {
        half?.dispose();
      }
      return rows.map((r) => this.result(r));
    });
  }

  /**
   * How many of `sorted` (ascending prompt length) from `first` on the next batch takes:
   * at most maxBatch, and while the rows' cache (the longest prompt, the last taken, plus
   * the most new tokens) and logits fit maxBatchBytes; at least one.
   */
  private batchRows(sorted: readonly Row[], first: number): number {
    const cfg = this.models.config;
    let steps = sorted[first].req.params.maxTokens;
    let rows = 1;
    while (rows < this.maxBatch && first + rows < sorted.length) {
      const next = sorted[first + rows].req;
      const capacity = cacheLength(next.promptIds.length, Math.max(steps, next.params.maxTokens));
      if ((rows + 1) * decodeRowBytes(cfg, capacity) > this.maxBatchBytes) break;
      steps = Math.max(steps, next.params.maxTokens);
      rows++;
    }
    return rows;
  }

  private newRow(req: GenerationRequest, index: number): Row {
    const p = req.params;
    const stopIds = new Set(p.stopTokenIds ?? []);
    if (!p.ignoreEos) for (const id of [...this.models.config.eosTokenIds, ...(this.tokenizer?.eosTokenIds ?? [])]) stopIds.add(id);
    const watcher = p.stop?.length && this.tokenizer ? new StopStringWatcher(this.tokenizer, p.stop, p.skipSpecialTokens ?? false) : null;
    return {
      index, req, seed: p.seed ?? randomSeed(), stopIds, watcher,
      tokens: [], logprobs: [], top: p.logprobs ? [] : null, done: p.maxTokens === 0, finishReason: 'length',
    };
  }

  private async runBatch(model: CausalLM, half: HalfWeights | null, rows: Row[], onToken: GenerateOptions['onToken']): Promise<void> {
    const P = Math.max(...rows.map((r) => r.req.promptIds.length));
    const steps = Math.max(...rows.map((r) => r.req.params.maxTokens));
    const padLeft = Int32Array.from(rows, (r) => P - r.req.promptIds.length);
    // Rows asking the same prompt (a group's samples of it, n > 1) are prefilled once:
    // the prefill runs the distinct prompts, then every row's cache row is copied from
    // its prompt's.
    const { distinct, copyFrom } = distinctPrompts(rows);
    const prompt = new Int32Array(distinct.length * P);
    distinct.forEach((b, u) => prompt.set(rows[b].req.promptIds, u * P + padLeft[b]));
    const perReadback = model.lmHead().storage.rt.policy.decode.stepsPerReadback;
    let cache = model.newCache(distinct.length, cacheLength(P, steps), Int32Array.from(distinct, (b) => padLeft[b]));
    this.usage.promptTokens += rows.reduce((n, r) => n + r.req.promptIds.length, 0);
    this.usage.prefilledTokens += distinct.reduce((n, b) => n + rows[b].req.promptIds.length, 0);
    // The rows the cache and `gpu` hold, in their order.
    let batch = rows;
    let gpu: DecodeRows | null = null;
    let pad: Tensor | null = null;
    // The chunk the GPU runs while the host records the next, its tokens not yet accepted.
    let inFlight: Chunk | null = null;
    try {
      this.usage.batches++;
      for (let t = 0; ;) {
        // The host's counts lag the GPU's by the chunk in flight: the rows its steps take
        // to their token limits will be done, and the next chunk is sized from there. A
        // row a stop id ends in it is seen a chunk late: its extra steps are wasted, not
        // wrong, since the GPU stopped it.
        const ahead = inFlight?.steps ?? 0;
        const live = batch.flatMap((r, b) => (!r.done && r.req.params.maxTokens - r.tokens.length > ahead ? [b] : []));
        let next: Chunk | null = null;
        if (t < steps && live.length > 0) {
          if (!gpu) {
            // The prefill's sampling step advances the positions to the first decode step's.
            const start = { ids: new Int32Array(batch.length), positions: Int32Array.from(padLeft, (p) => P - 1 - p) };
            gpu = decodeRows(batch.map((r) => this.decodeRow(r)), start, this.vocab, Math.min(perReadback, steps));
            pad = keep(tensor(padLeft, [batch.length], 'i32'));
          } else if (live.length <= batch.length * this.compactBelow) {
            // Copied on the GPU behind the chunk in flight, so the rows keep its progress.
            const smaller = cache.takeRows(live);
            cache.dispose();
            cache = smaller;
            const kept = takeDecodeRows(gpu, live);
            disposeDecodeRows(gpu);
            gpu = kept;
            pad!.dispose();
            pad = keep(tensor(cache.padLeft!, [live.length], 'i32'));
            batch = live.map((b) => batch[b]);
          }
          const n = Math.min(perReadback, steps - t, this.chunkEnd(batch, ahead));
          cache = this.recordChunk(model, half, gpu, pad!, cache, t === 0 ? { prompt, copyFrom } : null, n);
          t += n;
          // Its copy out of the record is recorded now, before the next chunk writes it.
          next = { batch, steps: n, read: readSteps(gpu, n) };
          // Awaited below, unless an error ends the batch first.
          next.read.catch(() => undefined);
          this.usage.chunks++;
          if (inFlight) this.usage.overlappedChunks++;
        }
        if (!inFlight && !next) break;
        if (inFlight) {
          const waited = performance.now();
          const outs = await inFlight.read;
          this.usage.readbackWaitMs += performance.now() - waited;
          const ended = outs.flatMap((out) => this.acceptStep(inFlight!.batch, out, onToken));
          // The GPU cannot see stop strings: the rows they ended stop there after the chunk
          // already recorded, whose tokens for them are dropped.
          const stopped = ended.map((r) => batch.indexOf(r)).filter((b) => b >= 0);
          if (stopped.length) finishDecodeRows(gpu!, stopped);
        }
        inFlight = next;
      }
    } finally {
      if (gpu) disposeDecodeRows(gpu);
      pad?.dispose();
      cache.dispose();
    }
  }

  /**
   * Records `steps` steps on `gpu`'s rows, the first of them the batch's prefill where
   * one is given: its distinct prompts, each row then taking its cache row and logits
   * from row `copyFrom[b]` of them. Each step reads the ids and positions the one before
   * left on the GPU. Returns the cache the next chunk continues (the prefill's, widened
   * to every row where prompts repeat).
   */
  private recordChunk(
    model: CausalLM, half: HalfWeights | null, gpu: DecodeRows, pad: Tensor, cache: ModelCache,
    prefill: { prompt: Int32Array; copyFrom: number[] | null } | null, steps: number,
  ): ModelCache {
    const B = gpu.count;
    const onGpu = { positions: gpu.positions, pad };
    const head = half && (headOnSkinny(model, B) || decodeOnTensorCores(model.lmHead().storage.rt, B, half.head.shape[0] * half.head.shape[1])) ? half.head : undefined;
    for (let j = 0; j < steps; j++) {
      const first = j === 0 ? prefill : null;
      scope(() =>
        noGrad(() => {
          if (!first) {
            sampleStep(lastLogits(model, model.hiddenCached({ ids: gpu.ids, batch: B, seq: 1, halfWeights: half?.weights, onGpu }, cache), head), gpu, j);
            return;
          }
          const hidden = this.prefill(model, first.prompt, cache.batch, first.prompt.length / cache.batch, cache);
          let logits = lastLogits(model, hidden, head);
          if (first.copyFrom) {
            // Recorded before the narrow cache is given back, so the copies read it first.
            const wide = cache.takeRows(first.copyFrom);
            cache.dispose();
            cache = wide;
            logits = takeRows(logits, first.copyFrom);
          }
          sampleStep(logits, gpu, j);
        }),
      );
      if (!first) this.usage.decodeSteps++;
      this.usage.rowSteps += B;
    }
    return cache;
  }

  /**
   * Steps until the batch's token limits call for a readback: when every live row has
   * reached its limit, or sooner where the rows reaching theirs leave at most
   * compactBelow of the batch generating, so it can shrink there. The limits are
   * counted from `ahead` steps past the tokens the host has accepted.
   */
  private chunkEnd(batch: readonly Row[], ahead: number): number {
    const left = batch.flatMap((r) => (r.done ? [] : [r.req.params.maxTokens - r.tokens.length - ahead])).filter((n) => n > 0).sort((a, b) => a - b);
    for (let k = 0; k < left.length; k++) {
      const after = left.length - k - 1;
      if (left[k] === left[k + 1]) continue;
      if (after > 0 && after <= batch.length * this.compactBelow) return left[k];
    }
    return left[left.length - 1];
  }

  /** A row's settings and progress as the GPU keeps them between readbacks. */
  private decodeRow(r: Row): DecodeRowState {
    const p = r.req.params;
    return {
      temperature: p.temperature, topP: p.topP, topK: p.topK > 0 ? p.topK : 0, topN: p.logprobs ?? 0,
      seed: r.seed, produced: r.tokens.length, maxTokens: p.maxTokens, done: r.done,
      // An id past the vocabulary (a config's EOS beyond a test model's) is never sampled.
      stopIds: [...r.stopIds].filter((id) => id < this.vocab),
    };
  }

  /** The prompts' hidden states at their last position's chunk, the cache filled with every position's keys and values. */
  private prefill(model: CausalLM, prompt: Int32Array, B: number, P: number, cache: ModelCache): Tensor {
    if (B * P <= this.prefillTokens) return model.hiddenCached({ ids: prompt, batch: B, seq: P }, cache);
    const width = Math.max(1, Math.floor(this.prefillTokens / B));
    let hidden: Tensor | null = null;
    for (let from = 0; from < P; from += width) {
      const w = Math.min(width, P - from);
      const ids = new Int32Array(B * w);
      for (let b = 0; b < B; b++) ids.set(prompt.subarray(b * P + from, b * P + from + w), b * w);
      hidden?.dispose();
      hidden = model.hiddenCached({ ids, batch: B, seq: w }, cache);
    }
    return hidden!;
  }

  /** Accepts a step's tokens for the rows not done yet; returns the rows a stop string ended. */
  private acceptStep(rows: readonly Row[], out: SampledTokens, onToken: GenerateOptions['onToken']): Row[] {
    const ended: Row[] = [];
    rows.forEach((r, b) => {
      if (r.done) return;
      this.usage.liveRowSteps++;
      const top = r.top && topOf(out, b, r.req.params.logprobs!);
      this.accept(r, out.ids[b], out.logprobs[b], top);
      if (r.stopText !== undefined) ended.push(r);
      if (!onToken) return;
      const event: TokenEvent = { id: out.ids[b], logprob: out.logprobs[b] };
      if (top) event.top = top;
      if (r.done) event.result = this.result(r);
      onToken(r.index, event);
    });
    return ended;
  }

  private accept(r: Row, id: number, logprob: number, top: TopLogprob[] | null): void {
    r.tokens.push(id);
    r.logprobs.push(logprob);
    if (top) r.top!.push(top);
    if (r.stopIds.has(id)) {
      r.done = true;
      r.finishReason = 'stop';
      if (r.req.params.stopTokenIds?.includes(id)) r.stopReason = id;
      return;
    }
    const hit = r.watcher?.push(id);
    if (hit) {
      r.done = true;
      r.finishReason = 'stop';
      r.stopReason = hit.stop;
      r.stopText = hit.text;
      return;
    }
    if (r.tokens.length >= r.req.params.maxTokens) r.done = true;
  }

  private result(r: Row): GenerationResult {
    const skip = r.req.params.skipSpecialTokens ?? false;
    const text = r.stopText ?? (this.tokenizer ? this.tokenizer.decode(r.tokens, { skipSpecialTokens: skip }) : '');
    const out: GenerationResult = { tokenIds: r.tokens, logprobs: r.logprobs, finishReason: r.finishReason, text };
    if (r.stopReason !== undefined) out.stopReason = r.stopReason;
    if (r.top) out.topLogprobs = r.top;
    return out;
  }

  private checkScoreRequests(requests: readonly ScoreRequest[]): void {
    requests.forEach((r, i) => {
      this.checkIds(r.promptIds as number[], `score request ${i}: promptIds`);
      this.checkIds(r.completionIds as number[], `score request ${i}: completionIds`);
      if (r.promptIds.length === 0) throw new EngineRequestError(`score request ${i}: promptIds is empty`);
    });
  }

  private static checkTemperature(temperature: number | undefined): number {
    const t = temperature ?? 1;
    if (!(t > 0) || !Number.isFinite(t)) throw new EngineRequestError(`scoring temperature must be a positive finite number, got ${temperature}`);
    return t;
  }

  async score(requests: readonly ScoreRequest[], opts: { model?: string; temperature?: number } = {}): Promise<number[][]> {
    this.checkScoreRequests(requests);
    const temperature = LocalEngine.checkTemperature(opts.temperature);
    return this.serial(async () => {
      const model = this.models.resolve(opts.model);
      const scored = requests.map((_, i) => i).filter((i) => requests[i].completionIds.length > 0);
      const seqs = scored.map((i) => [...requests[i].promptIds, ...requests[i].completionIds]);
      const values = await scoreTails(model, seqs, scored.map((i) => requests[i].promptIds.length), { temperature, maxBatchTokens: this.scoreBatchTokens });
      const out: number[][] = requests.map(() => []);
      scored.forEach((i, k) => (out[i] = Array.from(values[k])));
      return out;
    });
  }

  /** Log-prob and rank of every token after its prefix (tokens 1..n-1 of each sequence), for prompt_logprobs. */
  async promptLogprobs(seqs: readonly (readonly number[])[], opts: { model?: string; temperature?: number; top?: number } = {}): Promise<PromptTokenStats[]> {
    seqs.forEach((s, i) => this.checkIds(s as number[], `sequence ${i}`));
    const temperature = LocalEngine.checkTemperature(opts.temperature);
    return this.serial(async () => promptTokenStats(this.models.resolve(opts.model), seqs, { temperature, top: opts.top, maxBatchTokens: this.scoreBatchTokens }));
  }

  loadLoraAdapter(name: string, path: string): Promise<void> {
    return this.serial(async () => this.models.loadAdapter(name, path));
  }

  unloadLoraAdapter(name: string): Promise<void> {
    return this.serial(async () => this.models.unloadAdapter(name));
  }

  reloadWeights(path: string): Promise<void> {
    return this.serial(async () => this.models.reloadWeights(path));
  }

  close(): Promise<void> {
    return this.serial(async () => this.models.dispose());
  }
}

/**
 * The rows of a batch whose prompts differ, the first row of each prompt, and for every
 * row the index among them of the row holding its prompt (null when none repeats).
 */
function distinctPrompts(rows: readonly { req: GenerationRequest }[]): { distinct: number[]; copyFrom: number[] | null } {
  const seen = new Map<string, number>();
  const distinct: number[] = [];
  const copyFrom = rows.map((r, b) => {
    const key = r.req.promptIds.join(',');
    let u = seen.get(key);
    if (u === undefined) {
      u = distinct.length;
      seen.set(key, u);
      distinct.push(b);
    }
    return u;
  });
  return { distinct, copyFrom: distinct.length < rows.length ? copyFrom : null };
}
