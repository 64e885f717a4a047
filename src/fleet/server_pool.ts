// Rollouts (and teacher scoring, and evaluation) on OpenAI-compatible servers as an
// Engine: one server or several (docs/SERVING.md). A pool either serves the servers'
// own weights under a fixed name (a frozen teacher, `eval --engine http`), or the
// run's weights, which it keeps current on every server:
//   - before the first rollout, a preflight: a server answers, serves the model and
//     vocabulary the run uses, has the routes the sync needs and a context that holds
//     the run's longest request, and is written to by this run alone. A pool starts
//     with the servers that answer and pass, and takes the others in once they answer
//     and pass (unless asked to wait for all); a server that refuses connections
//     (nothing listens there) is not waited for unless the wait is asked for, so a
//     wrong address or a server not started costs seconds, not the whole wait;
//   - at the start the run's current version is pushed to every server, so a server
//     that cannot load the run's weights (our serve without --allowed-root over the
//     run directory, a server that cannot read it) stops the run before any rollout;
//   - the current version is pushed to every server that does not hold it, checked
//     with the weights probe, after every update, and whenever a request fails in a
//     way a restart would explain (no connection, 5xx, the adapter unknown): a
//     restarted server is back on its base weights;
//   - every request names the weights it must be served by (the version's adapter
//     with LoRA).
// With several servers, an episode's requests go to the server with the least work in
// flight when it starts, and stay there. A server that stops answering past
// failoverSeconds, or misses a push, leaves the pool until it is back and holds the
// current version again: its episodes start over on the others (the request comes back
// `lost`), scoring requests go elsewhere, and the run stops only when no server is
// left after serverWaitSeconds. Requests go only to servers holding the current
// version, so an iteration's rollouts never mix versions.

import { EngineHttpError } from '../net/http_call.ts';
import type { Tokenizer } from '../tokenizer/tokenizer.ts';
import type { Engine, GenerationRequest, GenerationResult, ScoreRequest } from '../engines/engine.ts';
import { InferenceServer, REPORT_EVERY_MS, ServerMismatchError, type Look, type ServerSettings } from './inference_server.ts';
import type { AttemptFailure } from '../net/http_call.ts';
import { PROBE_TEXT } from './weight_probe.ts';
import type { WeightVersion, WeightVersions } from './weight_versions.ts';
import { WriterLock } from './writer_lock.ts';
import { mapLimit } from '../util/map_limit.ts';
import * as path from '../storage/paths.ts';

export interface PoolSettings extends ServerSettings {
  urls: readonly string[];
  /** The config block the servers come from, for messages: "rollout", "teacher". */
  role: string;
  /** How the user sets the model, the key and whether to wait for every server, for messages (default: <role>.model, <role>.apiKey, <role>.waitForAllServers). */
  settingNames?: { model: string; apiKey: string; waitForAll?: string };
  /** Wait for a server that refuses connections at the start (the wait was asked for: it may still be starting). */
  waitForRefused: boolean;
  /** Start only once every server answers and passes the checks; otherwise the pool starts with those that do. */
  waitForAll: boolean;
  /** The base model's name at the servers (rollout.model); unset: the one /v1/models lists. */
  baseModel?: string;
  /** A fixed served model every request names (teacher.model, eval --adapter); unset: the run's current version, else the base model. */
  model?: string;
  /** The run's weight versions for a pool that serves them; null: the servers' own weights, never pushed. */
  versions: WeightVersions | null;
  probeIds: readonly number[];
  probeTolerance: number;
  /** With other servers to take the work, how long a failing one is retried before its episodes move (default 15). */
  failoverSeconds?: number;
}

/** One server's load since the last stats were taken. */
export interface ServerLoad {
  url: string;
  requests: number;
  tokens: number;
  busySeconds: number;
  inPool: boolean;
}

export interface PreflightNeeds {
  tokenizer: Tokenizer;
  /** The longest request the run sends (prompt + response + 1 scored), the settings that make it up, and which to lower to fit a context. */
  context?: { tokens: number; settings: string; lower: (maxModelLen: number) => string };
  /** The run directory: a pool that pushes weights takes each server's writer lock for it. */
  runDir?: string;
}

/** A server out of the pool is tried again this often. */
const CATCH_UP_EVERY_MS = 5_000;
/** How long a server must refuse connections at the start before it is taken for one nobody started. */
const REFUSED_FOR_MS = 2_000;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
/** A pause that does not keep the process alive: between tries of a server out of the pool. */
const idle = (ms: number) => new Promise<void>((r) => (setTimeout(r, ms) as { unref?: () => void }).unref?.());

const LOST = Symbol('lost');

/** How long a server that does not answer is waited for when the config does not say. */
export const DEFAULT_SERVER_WAIT_SECONDS = 300;

/** A look at a server that found it down. */
type Down = Exclude<Look, { state: 'up' }>;

/** A failure that says the server, not the request, is the problem. */
function serverFailure(e: unknown): boolean {
  if (e instanceof ServerMismatchError) return true;
  return e instanceof EngineHttpError && (e.kind === 'unreachable' || e.kind === 'timeout' || e.kind === 'server');
}

export class ServerPool implements Engine {
  readonly name: string;
  readonly servers: InferenceServer[];
  private readonly locks: WriterLock[] = [];
  private readonly restoring = new Map<InferenceServer, Promise<void>>();
  private readonly reported = new Map<InferenceServer, number>();
  /** Requests (tokens asked for) in flight per server, for least-outstanding-work dispatch. */
  private readonly outstanding = new Map<InferenceServer, number>();
  /** The server each episode runs on (by trajectory id). */
  private readonly pins = new Map<string, InferenceServer>();
  private readonly catchingUp = new Map<InferenceServer, Promise<void>>();
  /** Rejoins under way (waiting for the server, or pushing to it), by server: one at a time each, and one a rollout can wait for. */
  private readonly rejoining = new Map<InferenceServer, Promise<void>>();
  /** What the preflight checks a server against; set by preflight, used again for servers that come up later. */
  private needs: PreflightNeeds | null = null;
  /** Servers that passed the checks. */
  private readonly checked = new Set<InferenceServer>();
  /** Servers that have been in the pool (a server down at the start has not, until it joins). */
  private readonly joined = new Set<InferenceServer>();
  /** Why a server that answers cannot serve the run, as last logged (each new reason is logged once). */
  private readonly unfit = new Map<InferenceServer, string>();
  private closed = false;

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
      s.engine.beforeRetry = (f) => this.beforeRetry(s, f);
      s.engine.patience = () => this.patienceMs(s);
      this.outstanding.set(s, 0);
      return s;
    });
    this.name = this.servers.length === 1 ? this.servers[0].engine.name : `http:${this.servers.length} servers`;
  }

  /** The shortest context of the servers the checks have read (each one that joins later holds the run's longest request too). */
  get contextLength(): number | undefined {
    const lens = this.servers.map((s) => s.engine.contextLength).filter((l): l is number => l !== undefined);
    return lens.length ? Math.min(...lens) : undefined;
  }

  private get names(): { model: string; apiKey: string; waitForAll?: string } {
    const role = this.settings.role;
    return this.settings.settingNames ?? { model: `${role}.model`, apiKey: `${role}.apiKey`, waitForAll: `${role}.waitForAllServers` };
  }

  private get versions(): WeightVersions | null {
    return this.settings.versions;
  }

  private get current(): WeightVersion | null {
    return this.versions?.current ?? null;
  }

  /**
   * Before the first request: the servers that answer serve what the run needs (see the
   * file's comment). Every server must, with waitForAll; otherwise those that do not
   * answer yet are out of the pool, tried every few seconds, and join once they answer
   * and pass.
   */
  async preflight(needs: PreflightNeeds): Promise<void> {
    this.needs = needs;
    if (this.versions && needs.runDir) {
      for (const s of this.servers) this.locks.push(WriterLock.acquire(s.engine.base, needs.runDir));
    }
    const { up, down } = await this.awaitStart();
    for (const s of up) await this.check(s, needs);
    for (const s of up) this.joined.add(s);
    for (const [s, look] of down) {
      s.inPool = false;
      s.away = true;
      this.settings.log(
        `${this.settings.role} server ${s.url} is not answering (${look.reason}): the run starts with ${up.length} of ${this.servers.length} servers ` +
        `and takes it in once it answers${this.names.waitForAll ? ` (${this.names.waitForAll}=true waits for every server instead)` : ''}`,
      );
      this.catchUp(s);
    }
  }

  /**
   * Looks at the servers until enough answer: all of them with waitForAll, else one.
   * Servers that refuse connections for REFUSED_FOR_MS stop the wait at once unless
   * waitForRefused (nothing listens there: a wrong address, a server not started); others
   * are waited for up to waitSeconds, reported every 30 s.
   */
  private async awaitStart(): Promise<{ up: InferenceServer[]; down: Map<InferenceServer, Down> }> {
    const started = performance.now();
    const waitMs = this.settings.waitSeconds * 1000;
    const refusedSince = new Map<InferenceServer, number>();
    const up = new Set<InferenceServer>();
    let reported = -Infinity;
    let backoff = 250;
    for (;;) {
      const pending = this.servers.filter((s) => !up.has(s));
      const looks = new Map(await Promise.all(pending.map(async (s) => [s, await s.look()] as const)));
      const now = performance.now();
      const down = new Map<InferenceServer, Down>();
      for (const [s, look] of looks) {
        if (look.state === 'up') up.add(s);
        else down.set(s, look);
        if (look.state === 'refused') refusedSince.set(s, refusedSince.get(s) ?? now);
        else refusedSince.delete(s);
      }
      if (down.size === 0 || (!this.settings.waitForAll && up.size > 0)) return { up: this.servers.filter((s) => up.has(s)), down };
      const dead = this.settings.waitForRefused ? [] : [...down.keys()].filter((s) => now - (refusedSince.get(s) ?? now) >= REFUSED_FOR_MS);
      if (dead.length && (this.settings.waitForAll || dead.length === down.size)) throw this.nobodyListens(dead, down);
      const waited = now - started;
      if (waited >= waitMs) {
        const which = [...down].map(([s, look]) => `${s.url} (${look.reason})`).join('; ');
        throw new EngineHttpError(`${this.settings.role}: no answer within ${this.settings.waitSeconds} s (${this.settings.waitSetting}) from ${which}`, null, [...down.keys()][0].url);
      }
      if (waited >= REFUSED_FOR_MS && waited - reported >= REPORT_EVERY_MS) {
        reported = waited;
        const which = [...down].map(([s, look]) => `${s.url} (${look.reason})`).join('; ');
        this.settings.log(`${this.settings.role}: waiting for ${which}: ${(waited / 1000).toFixed(0)} s of up to ${this.settings.waitSeconds} s (${this.settings.waitSetting})`);
      }
      await sleep(backoff);
      backoff = Math.min(backoff * 2, 4000);
    }
  }

  /** The error for servers that refuse connections at the start, naming the setting that would wait for them. */
  private nobodyListens(dead: InferenceServer[], looks: Map<InferenceServer, Down>): ServerMismatchError {
    const role = this.settings.role;
    const which = dead.map((s) => `${s.url} (${looks.get(s)!.reason})`).join('; ');
    return new ServerMismatchError(
      `${role} server${dead.length > 1 ? 's' : ''} ${which} refuse${dead.length > 1 ? '' : 's'} connections: nothing listens there. ` +
      `Start the server, or correct the address; to wait for a server that is still starting, set ${this.settings.waitSetting} (how long to wait, in seconds)`,
    );
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
    if (v) {
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
    this.checked.add(s);
  }

  /**
   * The start of a run: the run's current version pushed to every server in the pool
   * and checked with the probe, whatever it held (what it held is said when it differs).
   * This is the sync's real check: a server that cannot load the run's weights stops the
   * run here, before any rollout, saying why.
   */
  async start(): Promise<void> {
    const v = this.current;
    if (!v) return;
    await Promise.all(this.servers.filter((s) => s.inPool).map(async (s) => {
      // An adapter the server does not list is not asked for: it has none of the run's weights to tell about.
      const listed = !v.lora || (await s.engine.modelCards()).some((c) => c.id === v.name);
      const d = listed ? await this.probeServed(s, v) : null;
      if (d !== null && d > this.settings.probeTolerance) {
        this.settings.log(`server ${s.url} holds other weights than the run's step ${v.step} (the weights probe differs by ${d.toFixed(3)} nats/token, tolerance ${this.settings.probeTolerance}); pushing the run's`);
      }
      try {
        await s.push(v, (n) => this.versions!.isOurs(n));
      } catch (e) {
        throw this.cannotLoad(s, v, e);
      }
      await this.confirm(s, v, `after pushing step ${v.step}`);
    }));
  }

  /** A push the server refused, as the reason and the fix: our serve reads paths only under its --allowed-root. */
  private cannotLoad(s: InferenceServer, v: WeightVersion, e: unknown): Error {
    if (!(e instanceof EngineHttpError) || e.status === null) return e as Error;
    const fix = e.status === 403
      ? ` Our serve reads weights only under its --allowed-root: start it with --allowed-root naming a folder that holds ${path.dirname(v.dir)} (the run directory, or output.dir above it).`
      : '';
    return new ServerMismatchError(`${this.settings.role} server ${s.url} cannot load the run's weights (${v.dir}): ${e.message}.${fix}`);
  }

  /**
   * After an update: the current version to every server in the pool, each checked with
   * the probe; the seconds it took. A server that misses it leaves the pool until it
   * catches up; the push fails only when no server got it.
   */
  async push(): Promise<number> {
    const versions = this.versions;
    const v = this.current;
    if (!versions || !v) throw new Error('push: this pool has no weights of the run to push');
    const t0 = performance.now();
    const targets = this.servers.filter((s) => s.inPool);
    const outcomes = await Promise.allSettled(targets.map(async (s) => {
      await s.push(v, (n) => versions.isOurs(n));
      // A server that restarted between the push and the check is back on its base weights, its adapters forgotten: it gets them once more.
      const d = await this.probeServed(s, v);
      if (d !== null && d <= this.settings.probeTolerance) return this.held(s, v);
      await this.ensureHolds(s, v, 'restore');
    }));
    const failed = outcomes.flatMap((o, i) => (o.status === 'rejected' ? [{ s: targets[i], e: o.reason as unknown }] : []));
    if (failed.length && !this.servers.some((s) => this.serving(s))) throw failed[0].e;
    for (const { s, e } of failed) this.dropOut(s, `missed the push of step ${v.step}: ${(e as Error)?.message ?? e}`);
    return (performance.now() - t0) / 1000;
  }

  /** Servers taking requests now. */
  get inPool(): number {
    return this.servers.filter((s) => this.serving(s)).length;
  }

  /** Each server's load since the last call. */
  takeLoad(): ServerLoad[] {
    return this.servers.map((s) => ({ url: s.url, ...s.takeWork(), inPool: this.serving(s) }));
  }

  /** The largest probe distance the servers showed at their last check. */
  get probeDistance(): number | null {
    const ds = this.servers.map((s) => s.lastProbe).filter((d): d is number => d !== null);
    return ds.length ? Math.max(...ds) : null;
  }

  /**
   * Before a rollout: every server in the pool still holds the current version (a
   * restart between requests loses it silently), and each server out of the pool that
   * answers within a second gets it and comes back.
   */
  async ensureCurrent(): Promise<void> {
    this.pins.clear();
    const v = this.current;
    if (!v) return;
    await Promise.all(this.servers.filter((s) => !s.inPool).map(async (s) => {
      // A catch-up already under way (perhaps of an older version) is waited for, not passed over: the rollout would start without a server about to hold its weights.
      await this.rejoining.get(s)?.catch(() => undefined);
      await this.rejoin(s, v, 1000).catch(() => undefined);
    }));
    const targets = this.servers.filter((s) => s.inPool);
    const outcomes = await Promise.allSettled(targets.map((s) => this.ensureHolds(s, v, 'check')));
    const failed = outcomes.flatMap((o, i) => (o.status === 'rejected' ? [{ s: targets[i], e: o.reason as unknown }] : []));
    if (failed.length && !this.servers.some((s) => this.serving(s))) throw failed[0].e;
    for (const { s, e } of failed) this.dropOut(s, (e as Error)?.message ?? String(e));
  }

  /**
   * The probe's distance under `v`, or null when the server does not know v's adapter:
   * a server that restarted forgets its adapters, and says so with a 404 (vLLM: "The
   * model `x` does not exist.").
   */
  private async probeServed(s: InferenceServer, v: WeightVersion): Promise<number | null> {
    try {
      return await s.probe(v, this.settings.probeIds);
    } catch (e) {
      if (v.lora && e instanceof EngineHttpError && e.status === 404) return null;
      throw e;
    }
  }

  /** Puts `v` on `s` unless the server shows it holds it already. */
  private async ensureHolds(s: InferenceServer, v: WeightVersion, when: 'check' | 'restore'): Promise<void> {
    const versions = this.versions!;
    const tol = this.settings.probeTolerance;
    if (v.lora) {
      const listed = (await s.engine.modelCards()).some((c) => c.id === v.name);
      const d = listed ? await this.probeServed(s, v) : null;
      if (d !== null && d <= tol) return this.held(s, v);
      this.settings.log(`server ${s.url} no longer serves the adapter ${v.name} (restarted?): loading it again`);
    } else if (s.away) {
      this.settings.log(`server ${s.url} stopped answering for a while (a restart brings back its base weights): pushing the run's step ${v.step} again`);
    } else {
      const d = await s.probe(v, this.settings.probeIds);
      if (d <= tol) return this.held(s, v);
      this.settings.log(`server ${s.url} holds other weights than the run's step ${v.step} (the weights probe differs by ${d.toFixed(3)} nats/token, tolerance ${tol}): restarted?; pushing the run's`);
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

  /** A line every 30 s while a server is being waited for. */
  private report(s: InferenceServer, f: { reason: string; elapsedMs: number; deadlineMs: number }): void {
    const last = this.reported.get(s) ?? -Infinity;
    const now = performance.now();
    if (now - last < REPORT_EVERY_MS) return;
    this.reported.set(s, now);
    const setting = f.deadlineMs === s.waitMs ? `, ${this.settings.waitSetting}` : '';
    this.settings.log(`server ${s.url}: ${f.reason}; retrying (${(f.elapsedMs / 1000).toFixed(0)} s of up to ${(f.deadlineMs / 1000).toFixed(0)} s${setting})`);
  }

  /** Whether `s` takes requests: in the pool and, for a pool that pushes weights, on the current version. */
  private serving(s: InferenceServer): boolean {
    return s.inPool && (!this.versions || s.holds === this.current);
  }

  /** How long a request to `s` keeps retrying: briefly when other servers can take its work. */
  private patienceMs(s: InferenceServer): number {
    const others = this.servers.some((o) => o !== s && this.serving(o));
    return others ? (this.settings.failoverSeconds ?? 15) * 1000 : s.waitMs;
  }

  /**
   * Before a generation or scoring request is sent again: once the server answers, it
   * must hold the current weights (a server that came back restarted is on its base
   * weights). A server out of the pool is not waited for.
   */
  private async beforeRetry(s: InferenceServer, f: AttemptFailure): Promise<void> {
    if (!s.inPool) throw new EngineHttpError(`server ${s.url} left the pool`, null, s.url, 'unreachable');
    await this.restore(s, Math.max(1000, this.patienceMs(s) - f.elapsedMs));
  }

  /** Waits up to `waitMs` for `s` to answer, then puts the current version back on it; one restore per server at a time. */
  private restore(s: InferenceServer, waitMs = s.waitMs): Promise<void> {
    let p = this.restoring.get(s);
    if (!p) {
      p = (async () => {
        await s.waitUntilUp('not answering (restarting?)', waitMs);
        const v = this.current;
        if (v) await this.ensureHolds(s, v, 'restore');
      })().finally(() => this.restoring.delete(s));
      this.restoring.set(s, p);
    }
    return p;
  }

  /** Takes `s` out of the pool until it answers and holds the current version again; its episodes start over elsewhere. */
  private dropOut(s: InferenceServer, why: string): void {
    if (!s.inPool) return;
    s.inPool = false;
    s.away = true;
    this.settings.log(`server ${s.url} is out of the pool (${why}); ${this.inPool} of ${this.servers.length} left, its episodes start over on them`);
    this.catchUp(s);
  }

  /** Tries `s`, out of the pool, every few seconds until it is back in. */
  private catchUp(s: InferenceServer): void {
    if (this.catchingUp.has(s)) return;
    const p = (async () => {
      while (!this.closed && !s.inPool) {
        // Short waits, the pauses between them unreferenced: a run that ends does not wait for a dead server.
        await this.rejoin(s, this.current, 1000).catch(() => undefined);
        if (!s.inPool) await idle(CATCH_UP_EVERY_MS);
      }
    })().finally(() => this.catchingUp.delete(s));
    this.catchingUp.set(s, p);
  }

  /**
   * Brings `s` back into the pool once it answers (within `waitMs`), passes the
   * preflight's checks if it has not yet (a server that was down at the start), and
   * holds `v`, the current version.
   */
  private rejoin(s: InferenceServer, v: WeightVersion | null, waitMs: number): Promise<void> {
    if (s.inPool) return Promise.resolve();
    const inFlight = this.rejoining.get(s);
    if (inFlight) return inFlight;
    const p = (async () => {
      await s.waitUntilUp('out of the pool, waiting for it', waitMs);
      if (!this.checked.has(s)) await this.checkLate(s);
      if (v) await this.ensureHolds(s, v, 'restore');
      if (this.current !== v || this.closed || s.inPool) return;
      s.inPool = true;
      const first = !this.joined.has(s);
      this.joined.add(s);
      this.settings.log(`server ${s.url} ${first ? 'answers and joins the pool' : 'is back in the pool'}${v ? ` with step ${v.step}` : ''}`);
    })().finally(() => this.rejoining.delete(s));
    this.rejoining.set(s, p);
    return p;
  }

  /** The preflight's checks for a server that came up after the start; what keeps it out is logged once per reason. */
  private async checkLate(s: InferenceServer): Promise<void> {
    try {
      await this.check(s, this.needs!);
      this.unfit.delete(s);
    } catch (e) {
      const why = (e as Error)?.message ?? String(e);
      if (e instanceof ServerMismatchError && this.unfit.get(s) !== why) {
        this.unfit.set(s, why);
        this.settings.log(`server ${s.url} answers but cannot serve the run, so it stays out of the pool: ${why}`);
      }
      throw e;
    }
  }

  /** The serving server with the least work in flight, or null when none serves. */
  private leastLoaded(): InferenceServer | null {
    let best: InferenceServer | null = null;
    for (const s of this.servers) if (this.serving(s) && (best === null || this.outstanding.get(s)! < this.outstanding.get(best)!)) best = s;
    return best;
  }

  /**
   * The server a request goes to: its episode's (a later turn whose server was lost:
   * LOST), else the least loaded; null when no server serves now. Synchronous, so the
   * work is counted before the next request chooses.
   */
  private chooseNow(r?: { trajectoryId: string; turn: number }): InferenceServer | typeof LOST | null {
    const pinned = r ? this.pins.get(r.trajectoryId) : undefined;
    if (r && pinned && r.turn > 0) return this.serving(pinned) ? pinned : LOST;
    const s = this.leastLoaded();
    if (r && s) this.pins.set(r.trajectoryId, s);
    return s;
  }

  /** chooseNow, waiting (up to serverWaitSeconds) for a server to come back when none serves. */
  private async choose(r?: { trajectoryId: string; turn: number }): Promise<InferenceServer | typeof LOST> {
    const started = performance.now();
    for (;;) {
      const s = this.chooseNow(r);
      if (s !== null) return s;
      if (performance.now() - started > this.settings.waitSeconds * 1000 || this.closed) {
        throw new Error(`${this.settings.role}: no inference server left (${this.servers.map((x) => x.url).join(', ')} all stopped answering or missed a push, and none came back within ${this.settings.waitSeconds} s)`);
      }
      await sleep(250);
    }
  }

  /**
   * Runs a request on a server, counting its work. A request for an adapter the server
   * lost restores it once and retries. With other servers left, a server that fails
   * leaves the pool: an episode's request comes back LOST (the episode starts over),
   * any other request goes to another server.
   */
  private async on<T>(work: number, fn: (s: InferenceServer, model: string) => Promise<T>, opts: { model?: string; episode?: { trajectoryId: string; turn: number } }): Promise<{ value: T; server: InferenceServer } | { lost: string }> {
    for (;;) {
      const s = this.chooseNow(opts.episode) ?? (await this.choose(opts.episode));
      if (s === LOST) return { lost: 'the inference server running the episode left the pool' };
      this.outstanding.set(s, this.outstanding.get(s)! + work);
      s.begin();
      let tokens = 0;
      try {
        const name = () => opts.model ?? this.settings.model ?? s.modelFor(this.current);
        try {
          const value = await fn(s, name());
          tokens = Array.isArray((value as { tokenIds?: unknown }).tokenIds) ? (value as { tokenIds: unknown[] }).tokenIds.length : 0;
          return { value, server: s };
        } catch (e) {
          const lostAdapter = e instanceof EngineHttpError && e.status === 404 && this.current?.lora && opts.model === undefined && this.settings.model === undefined;
          if (lostAdapter) {
            await this.restore(s);
            const value = await fn(s, name());
            return { value, server: s };
          }
          throw e;
        }
      } catch (e) {
        if (!(this.servers.length > 1 && serverFailure(e))) throw e;
        this.dropOut(s, (e as Error).message);
        if (opts.episode) return { lost: `server ${s.url} left the pool: ${(e as Error).message}` };
      } finally {
        this.outstanding.set(s, this.outstanding.get(s)! - work);
        s.end(tokens);
      }
    }
  }

  private get concurrency(): number {
    return (this.settings.http?.concurrency ?? 64) * this.servers.length;
  }

  generate(requests: readonly GenerationRequest[], opts: { model?: string } = {}): Promise<GenerationResult[]> {
    return mapLimit(requests, this.concurrency, async (r) => {
      const c = r.context;
      const episode = c ? { trajectoryId: c.trajectoryId, turn: c.turn } : undefined;
      const out = await this.on(r.promptIds.length + r.params.maxTokens, (s, model) => s.engine.generateOne(r, model), { model: opts.model, episode });
      if ('lost' in out) return { tokenIds: [], logprobs: [], finishReason: 'length', text: '', lost: out.lost } satisfies GenerationResult;
      const result: GenerationResult = { ...out.value, server: out.server.url };
      const v = this.current;
      if (v) result.version = v.step;
      return result;
    });
  }

  async score(requests: readonly ScoreRequest[], opts: { model?: string; temperature?: number } = {}): Promise<number[][]> {
    return mapLimit(requests, this.concurrency, async (r) => {
      const out = await this.on(r.promptIds.length + r.completionIds.length, (s, model) => s.engine.scoreOne(r, model, opts.temperature ?? 1), { model: opts.model });
      if ('lost' in out) throw new Error(out.lost);
      return out.value;
    });
  }

  /** Gives the servers' writer locks back and stops waiting for servers out of the pool. */
  close(): void {
    this.closed = true;
    for (const l of this.locks.splice(0)) l.release();
  }
}
