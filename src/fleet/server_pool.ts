// Rollouts (and teacher scoring, and evaluation) on OpenAI-compatible servers as an
// Engine: one server or several (docs/SERVING.md). A pool either serves the servers'
// own weights under a fixed name (a frozen teacher, `eval --engine http`), or the
// run's weights, which it keeps current on every server:
//   - before the first rollout, a preflight: every server answers, serves the model
//     and vocabulary the run uses, has the routes the sync needs and a context that
//     holds the run's longest request, and is written to by this run alone;
//   - the run's current version is pushed to every server that does not hold it,
//     checked with the weights probe, at the start, after every update, and whenever
//     a request fails in a way a restart would explain (no connection, 5xx, the
//     adapter unknown): a restarted server is back on its base weights;
//   - every request names the weights it must be served by (the version's adapter
//     with LoRA).

import { EngineHttpError } from '../net/http_call.ts';
import type { Tokenizer } from '../models/tokenizer.ts';
import type { Engine, GenerationRequest, GenerationResult, ScoreRequest } from '../rollout/engine.ts';
import { InferenceServer, ServerMismatchError, type ServerSettings } from './inference_server.ts';
import { PROBE_TEXT } from './weight_probe.ts';
import type { WeightVersion, WeightVersions } from './weight_versions.ts';
import { WriterLock } from './writer_lock.ts';

export interface PoolSettings extends ServerSettings {
  urls: readonly string[];
  /** The config block the servers come from, for messages: "rollout", "teacher". */
  role: string;
  /** How the user sets the model and the key, for messages (default: <role>.model, <role>.apiKey). */
  settingNames?: { model: string; apiKey: string };
  /** The base model's name at the servers (rollout.model); unset: the one /v1/models lists. */
  baseModel?: string;
  /** A fixed served model every request names (teacher.model, eval --adapter); unset: the run's current version, else the base model. */
  model?: string;
  /** The run's weight versions for a pool that serves them; null: the servers' own weights, never pushed. */
  versions: WeightVersions | null;
  probeIds: readonly number[];
  probeTolerance: number;
}

export interface PreflightNeeds {
  tokenizer: Tokenizer;
  /** The longest request the run sends (prompt + response + 1 scored), the settings that make it up, and which to lower to fit a context. */
  context?: { tokens: number; settings: string; lower: (maxModelLen: number) => string };
  /** The run directory: a pool that pushes weights takes each server's writer lock for it. */
  runDir?: string;
}

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

const REPORT_EVERY_MS = 10_000;

export class ServerPool implements Engine {
  readonly name: string;
  readonly servers: InferenceServer[];
  private readonly locks: WriterLock[] = [];
  private readonly restoring = new Map<InferenceServer, Promise<void>>();
  private readonly reported = new Map<InferenceServer, number>();
  /** Requests (tokens asked for) in flight per server, for least-outstanding-work dispatch. */
  private readonly outstanding = new Map<InferenceServer, number>();

  constructor(private readonly settings: PoolSettings) {
    if (!settings.urls.length) throw new Error(`${settings.role}.url: no server given`);
    const seen = new Set<string>();
    this.servers = settings.urls.map((url) => {
      const s = new InferenceServer(url, settings, settings.baseModel);
      if (seen.has(s.engine.base)) throw new Error(`${settings.role}.url: ${s.engine.base} is listed twice`);
      seen.add(s.engine.base);
      s.engine.onWait = (f) => {
        if (f.kind === 'unreachable' || f.kind === 'timeout') s.away = true;
        this.report(s, f);
      };
      s.engine.beforeRetry = () => this.restore(s);
      this.outstanding.set(s, 0);
      return s;
    });
    this.name = this.servers.length === 1 ? this.servers[0].engine.name : `http:${this.servers.length} servers`;
  }

  /** The shortest context of the servers, once the preflight has read them. */
  get contextLength(): number | undefined {
    const lens = this.servers.map((s) => s.engine.contextLength);
    return lens.every((l) => l !== undefined) ? Math.min(...(lens as number[])) : undefined;
  }

  private get names(): { model: string; apiKey: string } {
    return this.settings.settingNames ?? { model: `${this.settings.role}.model`, apiKey: `${this.settings.role}.apiKey` };
  }

  private get versions(): WeightVersions | null {
    return this.settings.versions;
  }

  private get current(): WeightVersion | null {
    return this.versions?.current ?? null;
  }

  /** Before the first request: every server answers and serves what the run needs (see the file's comment). */
  async preflight(needs: PreflightNeeds): Promise<void> {
    await Promise.all(this.servers.map((s) => s.waitUntilUp()));
    for (const s of this.servers) await this.check(s, needs);
    if (this.versions && needs.runDir) {
      for (const s of this.servers) this.locks.push(WriterLock.acquire(s.engine.base, needs.runDir));
    }
  }

  private async check(s: InferenceServer, needs: PreflightNeeds): Promise<void> {
    const where = `${this.settings.role} server ${s.url}`;
    let cards;
    try {
      cards = await s.describe();
    } catch (e) {
      if (e instanceof EngineHttpError && e.status === 401) {
        throw new ServerMismatchError(`${where} wants an API key (it was started with --api-key): set ${this.names.apiKey}, or VLLM_API_KEY or OPENAI_API_KEY in the environment${this.settings.apiKey ? '; the key given was refused' : ''}`);
      }
      throw e;
    }
    const names = cards.map((c) => c.id);
    const wanted = this.settings.model ?? this.settings.baseModel;
    if (wanted !== undefined && !names.includes(wanted)) {
      throw new ServerMismatchError(`${where} does not serve "${wanted}" (${this.names.model}); it serves ${names.map((n) => `"${n}"`).join(', ')}`);
    }
    const base = cards[0];
    if (needs.context && base.maxModelLen !== null && base.maxModelLen < needs.context.tokens) {
      throw new ServerMismatchError(
        `${needs.context.settings} = ${needs.context.tokens} tokens do not fit the context of ${where} (max_model_len ${base.maxModelLen}): ` +
        `start vLLM with --max-model-len ${needs.context.tokens} or more (at most the model's max_position_embeddings), or ${needs.context.lower(base.maxModelLen)}`,
      );
    }
    const ours = needs.tokenizer.encode(PROBE_TEXT, { addSpecialTokens: false });
    let theirs: number[] | null;
    try {
      theirs = await s.engine.tokenize(PROBE_TEXT);
    } catch (e) {
      // A server without /tokenize leaves the vocabulary to the weights probe.
      if (!(e instanceof EngineHttpError && e.status === 404)) throw e;
      theirs = null;
    }
    if (theirs && (theirs.length !== ours.length || theirs.some((t, i) => t !== ours[i]))) {
      throw new ServerMismatchError(`${where} tokenizes text differently from the run's tokenizer (${theirs.slice(0, 8).join(',')}... against ${ours.slice(0, 8).join(',')}...): it serves another model (it reports ${base.root ?? base.id})`);
    }
    const v = this.versions;
    if (!v) return;
    if (v.lora) {
      if (!(await s.engine.hasRoute('/v1/load_lora_adapter'))) {
        throw new ServerMismatchError(
          `${where} has no /v1/load_lora_adapter, which LoRA weight sync needs: start vLLM with VLLM_ALLOW_RUNTIME_LORA_UPDATING=True ` +
          'and --enable-lora --max-lora-rank <at least the adapter\'s rank> (docs/SERVING.md)',
        );
      }
    } else if (!(await s.engine.hasRoute('/collective_rpc'))) {
      throw new ServerMismatchError(
        `${where} has no /collective_rpc, which full-weight sync needs: start vLLM with VLLM_SERVER_DEV_MODE=1 (vLLM 0.16 or later reloads from a path), ` +
        'or train with LoRA (docs/SERVING.md)',
      );
    }
  }

  /** Puts the run's current version on every server that does not hold it (the start of a run). */
  async start(): Promise<void> {
    const v = this.current;
    if (v) await Promise.all(this.servers.map((s) => this.ensureHolds(s, v, 'start')));
  }

  /** After an update: the current version to every server, each checked with the probe; the seconds it took. */
  async push(): Promise<number> {
    const versions = this.versions;
    const v = this.current;
    if (!versions || !v) throw new Error('push: this pool has no weights of the run to push');
    const t0 = performance.now();
    await Promise.all(this.servers.map(async (s) => {
      await s.push(v, (n) => versions.isOurs(n));
      // A server that restarted between the push and the check is back on its base weights: it gets them once more.
      if ((await s.probe(v, this.settings.probeIds)) <= this.settings.probeTolerance) return this.held(s, v);
      await this.ensureHolds(s, v, 'restore');
    }));
    return (performance.now() - t0) / 1000;
  }

  /** The largest probe distance the servers showed at their last check. */
  get probeDistance(): number | null {
    const ds = this.servers.map((s) => s.lastProbe).filter((d): d is number => d !== null);
    return ds.length ? Math.max(...ds) : null;
  }

  /** Before a rollout: every server still holds the current version (a restart between requests loses it silently). */
  async ensureCurrent(): Promise<void> {
    const v = this.current;
    if (v) await Promise.all(this.servers.map((s) => this.ensureHolds(s, v, 'check')));
  }

  /** Puts `v` on `s` unless the server shows it holds it already. */
  private async ensureHolds(s: InferenceServer, v: WeightVersion, when: 'start' | 'check' | 'restore'): Promise<void> {
    const versions = this.versions!;
    const tol = this.settings.probeTolerance;
    if (v.lora) {
      const listed = (await s.engine.modelCards()).some((c) => c.id === v.name);
      if (listed && (await s.probe(v, this.settings.probeIds)) <= tol) return this.held(s, v);
      if (when !== 'start') this.settings.log(`server ${s.url} no longer serves the adapter ${v.name} (restarted?): loading it again`);
    } else if (s.away) {
      this.settings.log(`server ${s.url} stopped answering for a while (a restart brings back its base weights): pushing the run's step ${v.step} again`);
    } else {
      const d = await s.probe(v, this.settings.probeIds);
      if (d <= tol) return this.held(s, v);
      this.settings.log(
        `server ${s.url} holds other weights than the run's step ${v.step} (the weights probe differs by ${d.toFixed(3)} nats/token, tolerance ${tol})` +
        `${when === 'start' ? '' : ': restarted?'}; pushing the run's`,
      );
    }
    await s.push(v, (n) => versions.isOurs(n));
    await this.confirm(s, v, `after pushing step ${v.step}`);
  }

  /** The probe after a push: the server must now hold `v`, or the run stops saying what it found. */
  private async confirm(s: InferenceServer, v: WeightVersion, when: string): Promise<void> {
    const tol = this.settings.probeTolerance;
    const d = await s.probe(v, this.settings.probeIds);
    if (d > tol) {
      throw new ServerMismatchError(
        `server ${s.url}, ${when} (${v.dir}), scores the weights probe ${d.toFixed(3)} nats/token away from the trainer (tolerance ${tol}): ` +
        `it does not hold the run's weights. Is it serving the model the run trains, and can it read ${v.dir}? ` +
        `(A server computing in lower precision than the tolerance allows: raise ${this.settings.role}.probeTolerance.)`,
      );
    }
    this.held(s, v);
  }

  private held(s: InferenceServer, v: WeightVersion): void {
    s.holds = v;
    this.versions!.hold(s.engine.base, v);
  }

  /** A line every 10 s while a server is being waited for. */
  private report(s: InferenceServer, f: { reason: string; elapsedMs: number; deadlineMs: number }): void {
    const last = this.reported.get(s) ?? -Infinity;
    const now = performance.now();
    if (now - last < REPORT_EVERY_MS) return;
    this.reported.set(s, now);
    this.settings.log(`server ${s.url}: ${f.reason}; retrying (${(f.elapsedMs / 1000).toFixed(0)} s of up to ${(f.deadlineMs / 1000).toFixed(0)} s)`);
  }

  /**
   * Before a generation or scoring request is sent again: once the server answers, it
   * must hold the current weights (a server that came back restarted is on its base
   * weights). One restore per server at a time.
   */
  private restore(s: InferenceServer): Promise<void> {
    let p = this.restoring.get(s);
    if (!p) {
      p = (async () => {
        await s.waitUntilUp('not answering (restarting?)');
        const v = this.current;
        if (v) await this.ensureHolds(s, v, 'restore');
      })().finally(() => this.restoring.delete(s));
      this.restoring.set(s, p);
    }
    return p;
  }

  /** The server with the least work in flight. */
  private pick(): InferenceServer {
    let best = this.servers[0];
    for (const s of this.servers) if (this.outstanding.get(s)! < this.outstanding.get(best)!) best = s;
    return best;
  }

  /** Runs a request on a server, counting its work; a request for an adapter the server lost restores it once and retries. */
  private async on<T>(work: number, fn: (s: InferenceServer, model: string) => Promise<T>, model?: string): Promise<T> {
    const s = this.pick();
    this.outstanding.set(s, this.outstanding.get(s)! + work);
    try {
      const name = () => model ?? this.settings.model ?? s.modelFor(this.current);
      try {
        return await fn(s, name());
      } catch (e) {
        const lost = e instanceof EngineHttpError && e.status === 404 && this.current?.lora && model === undefined && this.settings.model === undefined;
        if (!lost) throw e;
        await this.restore(s);
        return await fn(s, name());
      }
    } finally {
      this.outstanding.set(s, this.outstanding.get(s)! - work);
    }
  }

  private get concurrency(): number {
    return (this.settings.http?.concurrency ?? 64) * this.servers.length;
  }

  generate(requests: readonly GenerationRequest[], opts: { model?: string } = {}): Promise<GenerationResult[]> {
    return mapLimit(requests, this.concurrency, (r) => this.on(r.promptIds.length + r.params.maxTokens, (s, model) => s.engine.generateOne(r, model), opts.model));
  }

  score(requests: readonly ScoreRequest[], opts: { model?: string; temperature?: number } = {}): Promise<number[][]> {
    return mapLimit(requests, this.concurrency, (r) => this.on(r.promptIds.length + r.completionIds.length, (s, model) => s.engine.scoreOne(r, model, opts.temperature ?? 1), opts.model));
  }

  /** Gives the servers' writer locks back. */
  close(): void {
    for (const l of this.locks.splice(0)) l.release();
  }
}
