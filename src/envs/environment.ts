// The environment a run's settings name: built in (its plugin, in-process), a server of
// ours, an AgentGym server, or several servers as one; and the turn contract it plays
// under those settings. The run's configuration (TrainConfig's env and rollout blocks)
// is what callers pass.

import { envPlugin } from '../../envs/registry.ts';
import type { AgentSpec } from './agent_spec.ts';
import { AgentGymEnvironment } from './agentgym.ts';
import { RemoteEnvironment } from './client.ts';
import { EnvironmentPool } from './env_pool.ts';
import type { Environment } from './types.ts';

/** What the factory reads of a run's env block; the environment's own settings are under its name (env.household, env.search, ...). */
export interface EnvironmentSettings {
  name: string;
  /** An environment server, or several as one pool; in-process when unset. */
  url?: string | readonly string[];
  agentgym: boolean;
  timeoutMs: number;
}

type EnvConfig = { env: EnvironmentSettings; rollout: { maxTurns: number } };

/** The environment's own settings: the block under its name. */
function ownOptions(env: EnvironmentSettings): Record<string, unknown> {
  return (env as unknown as Record<string, Record<string, unknown>>)[env.name];
}

export function makeEnvironment(cfg: EnvConfig, log?: (line: string) => void): Environment {
  const plugin = envPlugin(cfg.env.name);
  const urls = cfg.env.url === undefined ? [] : typeof cfg.env.url === 'string' ? [cfg.env.url] : cfg.env.url;
  const server = (url: string): Environment => {
    // The schema refuses env.agentgym for an environment without an AgentGym server.
    if (cfg.env.agentgym) return new AgentGymEnvironment(url, { ...plugin.agentgym!, timeoutMs: cfg.env.timeoutMs }, plugin.reward.success);
    const meta = { name: cfg.env.name, version: 'remote', maxSteps: cfg.rollout.maxTurns };
    return new RemoteEnvironment(url, meta, { timeoutMs: cfg.env.timeoutMs, accepts: [plugin.name, ...plugin.aliases] });
  };
  if (urls.length > 1) return new EnvironmentPool(urls.map((url) => ({ url, env: server(url) })), log);
  if (urls.length === 1) return server(urls[0]);
  return plugin.create(ownOptions(cfg.env));
}

/**
 * Before the first rollout: the config's environment server (env.url) answers and serves
 * its kind, and an in-process environment's own inputs are there (a search
 * environment's question files and retriever); throws saying what is wrong.
 */
export async function checkEnvironment(cfg: EnvConfig): Promise<void> {
  await makeEnvironment(cfg).check?.();
}

/** The turn contract of the config's environment under its settings. */
export function agentSpec(cfg: { env: Pick<EnvironmentSettings, 'name'> }): AgentSpec {
  const plugin = envPlugin(cfg.env.name);
  return plugin.agentFor?.(ownOptions(cfg.env as EnvironmentSettings)) ?? plugin.agent;
}
