// One inference server as the trainer keeps it: its HTTP engine, which of the run's
// weight versions it is known to hold, and the operations on it: wait for it to
// answer, read what it serves, push a version (a LoRA adapter, or full weights
// reloaded in place) and check with the weights probe that it holds it.

import { EngineHttpError } from '../net/http_call.ts';
import { HttpEngine, type HttpEngineOptions, type ServedModelCard } from '../engines/http_engine.ts';
import { probeDistance, serverProbe } from './weight_probe.ts';
import type { WeightVersion } from './weight_versions.ts';

/** A server that does not serve what the run needs (other weights that a push does not fix, missing routes, too short a context). */
export class ServerMismatchError extends Error {
  override name = 'ServerMismatchError';
}

export interface ServerSettings {
  apiKey?: string;
  /** How long a failing server is waited for. */
  waitSeconds: number;
  /** The setting that sets waitSeconds, for the lines that report a wait: rollout.serverWaitSeconds, eval's --server-wait. */
  waitSetting: string;
  /** Progress lines while waiting, what was found and fixed. */
  log: (line: string) => void;
  /** Request deadlines and backoff (tests shorten them). */
  http?: Pick<HttpEngineOptions, 'timeoutMs' | 'backoffMs' | 'maxBackoffMs' | 'concurrency'>;
}

/** How often a wait is reported. */
export const REPORT_EVERY_MS = 30_000;
/** The deadline of one GET /health: a server that takes longer is not answering (yet). */
const HEALTH_TIMEOUT_MS = 10_000;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** One look at a server: it answers, refuses connections (nothing listens at its address), or does not answer (yet). */
export type Look = { state: 'up' } | { state: 'refused' | 'silent'; reason: string };

/** Whether a failed connection means nothing listens there (refused, or a host name that does not resolve), rather than a server that is busy or starting. */
export function refusedConnection(e: unknown): boolean {
  return e instanceof EngineHttpError && e.kind === 'unreachable' && /ECONNREFUSED|ENOTFOUND|connection refused/i.test(e.message);
}

export class InferenceServer {
  readonly engine: HttpEngine;
  /** The version the server was last seen to hold (probe checked); null: unknown. */
  holds: WeightVersion | null = null;
  /** The base model's name at the server. */
  baseName: string | null = null;
  /** The last probe's distance from the trainer's log-probs. */
  lastProbe: number | null = null;
  /**
   * The server stopped answering since it last got the run's weights: it may have
   * restarted on its base weights, which the probe cannot tell from weights that
   * training has barely moved.
   */
  away = false;
  /** Takes requests: it answers and (for a pool that pushes weights) holds the current version. */
  inPool = true;
  /** Work done since the last stats were taken. */
  private work = { requests: 0, tokens: 0, busyMs: 0 };
  private inFlight = 0;
  private busySince = 0;

  /** A request starts. */
  begin(): void {
    if (this.inFlight++ === 0) this.busySince = performance.now();
  }

  /** A request ends, having generated `tokens`. */
  end(tokens: number): void {
    this.work.requests++;
    this.work.tokens += tokens;
    if (--this.inFlight === 0) this.work.busyMs += performance.now() - this.busySince;
  }

  /** Requests, generated tokens and seconds with a request in flight since the last call. */
  takeWork(): { requests: number; tokens: number; busySeconds: number } {
    const now = performance.now();
    const busyMs = this.work.busyMs + (this.inFlight > 0 ? now - this.busySince : 0);
    if (this.inFlight > 0) this.busySince = now;
    const out = { requests: this.work.requests, tokens: this.work.tokens, busySeconds: busyMs / 1000 };
    this.work = { requests: 0, tokens: 0, busyMs: 0 };
    return out;
  }

  constructor(
    readonly url: string,
    private readonly settings: ServerSettings,
    model?: string,
  ) {
    this.engine = new HttpEngine({ ...settings.http, baseUrl: url, model, apiKey: settings.apiKey, deadlineMs: settings.waitSeconds * 1000 });
  }

  get waitMs(): number {
    return this.settings.waitSeconds * 1000;
  }

  /** One GET /health. */
  async look(): Promise<Look> {
    try {
      await this.engine.call('GET', '/health', undefined, { once: true, timeoutMs: HEALTH_TIMEOUT_MS });
      return { state: 'up' };
    } catch (e) {
      return { state: refusedConnection(e) ? 'refused' : 'silent', reason: e instanceof Error ? e.message : String(e) };
    }
  }

  /** Waits until GET /health answers, reporting the wait every 30 s; throws after `waitMs` (default: waitSeconds). */
  async waitUntilUp(why = 'waiting for it to answer', waitMs = this.waitMs): Promise<void> {
    const started = performance.now();
    let reported = -Infinity;
    let backoff = 250;
    for (;;) {
      const look = await this.look();
      if (look.state === 'up') {
        if (reported > -Infinity) this.settings.log(`server ${this.url}: answering again after ${((performance.now() - started) / 1000).toFixed(0)} s`);
        return;
      }
      this.away = true;
      const waited = performance.now() - started;
      if (waited >= waitMs) {
        throw new EngineHttpError(`server ${this.url} did not answer within ${(waitMs / 1000).toFixed(0)} s (${this.settings.waitSetting}): ${look.reason}`, null, this.url);
      }
      if (waited - reported >= REPORT_EVERY_MS) {
        reported = waited;
        this.settings.log(`server ${this.url}: ${why} (${(waited / 1000).toFixed(0)} s of up to ${(waitMs / 1000).toFixed(0)} s, ${this.settings.waitSetting}): ${look.reason}`);
      }
      await sleep(backoff);
      backoff = Math.min(backoff * 2, 4000);
    }
  }

  /** GET /v1/models; learns the base model's name and the server's context. */
  async describe(): Promise<ServedModelCard[]> {
    const cards = await this.engine.describe();
    this.baseName = cards.find((c) => c.parent === null)!.id;
    return cards;
  }

  /** The name requests for version `v` ask for: its adapter, or the base model holding full weights. */
  modelFor(v: WeightVersion | null): string {
    return v?.lora ? v.name : this.engine.servedModel;
  }

  /** The probe's distance under version `v` (NaN-free: throws when the server cannot score it). */
  async probe(v: WeightVersion, ids: readonly number[]): Promise<number> {
    const d = probeDistance(await serverProbe(this.engine, ids, this.modelFor(v)), v.probe);
    this.lastProbe = d;
    return d;
  }

  /** Adapters of the run the server lists (from this invocation or an earlier one). */
  async adapters(isOurs: (name: string) => boolean): Promise<string[]> {
    return (await this.engine.modelCards()).filter((c) => c.parent !== null && isOurs(c.id)).map((c) => c.id);
  }

  /**
   * Loads version `v`: a LoRA adapter under its name (the run's other adapters are
   * unloaded after, a missing one being already gone), or full weights reloaded in place.
   */
  async push(v: WeightVersion, isOurs: (name: string) => boolean): Promise<void> {
    this.holds = null;
    this.away = false;
    if (!v.lora) {
      await this.engine.reloadWeights(v.dir);
      return;
    }
    const before = await this.adapters(isOurs);
    // A version the server already lists (an earlier, unverified push) is loaded again from its files.
    if (before.includes(v.name)) await this.unload(v.name);
    await this.engine.loadLoraAdapter(v.name, v.dir);
    for (const name of before) if (name !== v.name) await this.unload(name);
  }

  private async unload(name: string): Promise<void> {
    try {
      await this.engine.unloadLoraAdapter(name);
    } catch (e) {
      // Unloaded already (a restart forgets adapters): what the unload wanted.
      if (!(e instanceof EngineHttpError && e.status === 404)) throw e;
    }
  }
}
