// The environment a run's configuration names (built in, a server of ours, or an
// AgentGym server) and the fixed seeded task panel that validation and evaluation run,
// shared by the RL loop, the SFT run and the standalone evaluation so that their
// numbers are measured on the same tasks.

import { ENV_PLUGINS, envPlugin } from '../../envs/registry.ts';
import { AgentGymEnvironment } from '../envs/agentgym.ts';
import { RemoteEnvironment } from '../envs/client.ts';
import type { Environment, Split } from '../envs/types.ts';
import type { RolloutTask } from '../rollout/agent_loop.ts';
import { envOptionsOf, type TrainConfig } from '../config/config_schema.ts';

export function makeEnvironment(cfg: Pick<TrainConfig, 'env' | 'rollout'>): Environment {
  const plugin = envPlugin(cfg.env.name);
  if (cfg.env.url && cfg.env.agentgym) {
    if (!plugin.agentgym) {
      const have = ENV_PLUGINS.filter((p) => p.agentgym).map((p) => `${p.name} (${p.agentgym!.name})`).join(', ');
      throw new Error(`env.agentgym: ${cfg.env.name} has no AgentGym server (have ${have})`);
    }
    return new AgentGymEnvironment(cfg.env.url, { ...plugin.agentgym, timeoutMs: cfg.env.timeoutMs }, plugin.reward.success);
  }
  if (cfg.env.url) return new RemoteEnvironment(cfg.env.url, { name: cfg.env.name, version: 'remote', maxSteps: cfg.rollout.maxTurns }, { timeoutMs: cfg.env.timeoutMs });
  return plugin.create(envOptionsOf(cfg));
}

/** `count` tasks of `split` with environment seeds seed, seed + 1, ...: the same tasks every time. */
export function taskPanel(split: Split, seed: number, count: number): RolloutTask[] {
  return Array.from({ length: count }, (_, i) => ({ split, seed: seed + i }));
}
