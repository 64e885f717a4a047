// The environment a run's configuration names (built in, a server of ours, or an
// AgentGym server) and the fixed seeded task panel that validation and evaluation run,
// shared by the RL loop, the SFT run and the standalone evaluation so that their
// numbers are measured on the same tasks.

import { getEnvironment } from '../../envs/registry.ts';
import { AGENTGYM_PRESETS, AgentGymEnvironment } from '../envs/agentgym.ts';
import { RemoteEnvironment } from '../envs/client.ts';
import type { Environment, Split } from '../envs/types.ts';
import type { RolloutTask } from '../rollout/agent_loop.ts';
import type { TrainConfig } from './config_schema.ts';

export function makeEnvironment(cfg: Pick<TrainConfig, 'env' | 'rollout'>): Environment {
  if (cfg.env.url && cfg.env.agentgym) {
    const preset = cfg.env.name === 'shop' ? AGENTGYM_PRESETS.webshop : cfg.env.name === 'household' ? AGENTGYM_PRESETS.alfworld : null;
    if (!preset) throw new Error(`env.agentgym: no AgentGym preset for "${cfg.env.name}" (have household = ALFWorld, shop = WebShop)`);
    return new AgentGymEnvironment(cfg.env.url, { ...preset, timeoutMs: cfg.env.timeoutMs });
  }
  if (cfg.env.url) return new RemoteEnvironment(cfg.env.url, { name: cfg.env.name, version: 'remote', maxSteps: cfg.rollout.maxTurns }, { timeoutMs: cfg.env.timeoutMs });
  return getEnvironment(cfg.env.name);
}

/** `count` tasks of `split` with environment seeds seed, seed + 1, ...: the same tasks every time. */
export function taskPanel(split: Split, seed: number, count: number): RolloutTask[] {
  return Array.from({ length: count }, (_, i) => ({ split, seed: seed + i }));
}
