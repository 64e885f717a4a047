// The inference servers a run's configuration names (rollout.engine / teacher.engine
// http), as pools (src/fleet/), checked before the run directory is made: no server
// answering (one refusing connections at once, unless serverWaitSeconds asks to wait
// for it; others past serverWaitSeconds), or one that serves another model, lacks the
// routes the sync needs, has too short a context or is synced by another run, stops
// the run before any work; servers of a list that do not answer yet join later. The
// rollout servers serve the run's weights and get every update; so do the teacher's
// when the teacher is the policy itself (teacher.model unset), sharing the rollout
// pool when they are the same servers; a teacher.model is a fixed model of its
// servers, never pushed to.

import * as path from '../storage/paths.ts';
import type { Tokenizer } from '../tokenizer/tokenizer.ts';
import { runDir, type TrainConfig } from '../config/config.ts';
import { DEFAULT_SERVER_WAIT_SECONDS, ServerPool } from '../fleet/server_pool.ts';
import type { TrajectoryRecord } from '../rollout/sample.ts';
import type { Metrics } from '../report/metrics.ts';
import { probeIds } from '../fleet/weight_probe.ts';
import { runTag, WeightVersions } from '../fleet/weight_versions.ts';

/** The base URLs of an engine block's url (one or a list). */
export function serverUrls(url: string | readonly string[] | undefined): string[] {
  return url === undefined ? [] : typeof url === 'string' ? [url] : [...url];
}

/** The API key of an engine block: its apiKey, else VLLM_API_KEY, else OPENAI_API_KEY (as vLLM's own clients read it). */
export function serverApiKey(block: { apiKey?: string }): string | undefined {
  return block.apiKey || process.env.VLLM_API_KEY || process.env.OPENAI_API_KEY || undefined;
}

export interface RunServers {
  /** The run's weight versions when any server gets them. */
  versions: WeightVersions | null;
  rollout: ServerPool | null;
  teacher: ServerPool | null;
  /** The pools that get every update (each once). */
  synced: ServerPool[];
  close(): void;
}

const sameList = (a: readonly string[], b: readonly string[]) => a.length === b.length && a.every((u, i) => u.replace(/\/+$/, '') === b[i].replace(/\/+$/, ''));

/** Builds the run's pools and runs their preflight; nothing is pushed yet (RunServers.versions has no version until the trainer publishes one). */
export async function connectServers(cfg: TrainConfig, tokenizer: Tokenizer, log: (line: string) => void, opts: { teacherOnServer: boolean }): Promise<RunServers> {
  const rolloutUrls = cfg.rollout.engine === 'http' ? serverUrls(cfg.rollout.url) : [];
  const teacherUrls = opts.teacherOnServer && cfg.teacher.engine === 'http' ? serverUrls(cfg.teacher.url) : [];
  const teacherSynced = teacherUrls.length > 0 && cfg.teacher.model === undefined;
  const dir = runDir(cfg);
  const ids = probeIds(tokenizer);
  const versions = rolloutUrls.length || teacherSynced
    ? new WeightVersions(path.join(dir, 'sync'), !!cfg.model.lora, runTag(dir), ids)
    : null;
  const context = {
    tokens: cfg.rollout.maxPromptTokens + cfg.rollout.maxResponseTokens + 1,
    settings: `rollout.maxPromptTokens (${cfg.rollout.maxPromptTokens}) + rollout.maxResponseTokens (${cfg.rollout.maxResponseTokens}) + 1 (the token a scoring request generates)`,
    lower: (len: number) => `set rollout.maxPromptTokens to ${len - cfg.rollout.maxResponseTokens - 1} or less`,
  };
  const pool = (role: 'rollout' | 'teacher', urls: string[], synced: boolean) => {
    const block = cfg[role];
    return new ServerPool({
      role, urls, versions: synced ? versions : null,
      baseModel: synced ? block.model : undefined,
      model: synced ? undefined : block.model,
      apiKey: serverApiKey(block), failoverSeconds: block.failoverSeconds, probeTolerance: block.probeTolerance, probeIds: ids, log,
      waitSeconds: block.serverWaitSeconds ?? DEFAULT_SERVER_WAIT_SECONDS, waitSetting: `${role}.serverWaitSeconds`,
      waitForRefused: block.serverWaitSeconds !== undefined, waitForAll: block.waitForAllServers,
    });
  };
  const rollout = rolloutUrls.length ? pool('rollout', rolloutUrls, true) : null;
  const teacher = !teacherUrls.length ? null
    : teacherSynced && rollout && sameList(rolloutUrls, teacherUrls) ? rollout
    : pool('teacher', teacherUrls, teacherSynced);
  const all = [...new Set([rollout, teacher].filter((p): p is ServerPool => p !== null))];
  const servers: RunServers = { versions, rollout, teacher, synced: all.filter((p) => p === rollout || teacherSynced), close: () => all.forEach((p) => p.close()) };
  try {
    for (const p of all) await p.preflight({ tokenizer, context, runDir: dir });
  } catch (e) {
    servers.close();
    throw e;
  }
  return servers;
}

/** A server's address as metric keys name it: host:port. */
function serverKey(url: string): string {
  try {
    return new URL(url).host;
  } catch {
    return url;
  }
}

/**
 * Each rollout server's share of the iteration: the training episodes it ran (each
 * episode once, by the server its trajectory names), the tokens it generated and the
 * seconds it had requests in flight (every phase: rollout, teacher, validation); and
 * the servers left in the pool. With its summary line for the log.
 */
export function serverLoadMetrics(pool: ServerPool, trajectories: readonly TrajectoryRecord[]): { metrics: Metrics; line: string } {
  const episodes = new Map<string, number>();
  for (const t of trajectories) if (t.server !== undefined) episodes.set(t.server, (episodes.get(t.server) ?? 0) + 1);
  const metrics: Metrics = { 'fleet/servers_in_pool': pool.inPool };
  const parts: string[] = [];
  for (const load of pool.takeLoad()) {
    const key = `server/${serverKey(load.url)}`;
    const n = episodes.get(load.url) ?? 0;
    metrics[`${key}/episodes`] = n;
    metrics[`${key}/tokens`] = load.tokens;
    metrics[`${key}/busy_seconds`] = load.busySeconds;
    parts.push(`${serverKey(load.url)} ${n} episodes, ${load.tokens} tokens, ${load.busySeconds.toFixed(1)} s${load.inPool ? '' : ' (out of the pool)'}`);
  }
  return { metrics, line: `servers: ${parts.join('; ')}` };
}

/** The training episodes each environment server's sessions played, when there are several (env.url a list). */
export function envServerMetrics(trajectories: readonly TrajectoryRecord[]): Metrics {
  const metrics: Metrics = {};
  for (const t of trajectories) {
    if (t.envServer === undefined) continue;
    const key = `env_server/${serverKey(t.envServer)}/episodes`;
    metrics[key] = (metrics[key] ?? 0) + 1;
  }
  return metrics;
}
