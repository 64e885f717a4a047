// Every environment kind, by name: the one list the trainer, the config and the CLI
// read. Adding an environment is a plugin folder under envs/ and a line here.

import type { EnvPlugin } from '../src/envs/plugin.ts';
import type { Environment } from '../src/envs/types.ts';
import { householdPlugin } from './household/plugin.ts';
import { searchPlugin } from './search/plugin.ts';
import { shopPlugin } from './shop/plugin.ts';

export const ENV_PLUGINS: readonly EnvPlugin[] = [householdPlugin, shopPlugin, searchPlugin];

export function environmentNames(): string[] {
  return ENV_PLUGINS.map((p) => p.name);
}

/** The plugin of an environment kind, by its name or a name its servers report ("alfworld"). */
export function envPlugin(name: string): EnvPlugin {
  const plugin = ENV_PLUGINS.find((p) => p.name === name || p.aliases.includes(name));
  if (!plugin) {
    const known = ENV_PLUGINS.flatMap((p) => [p.name, ...p.aliases]).sort();
    throw new Error(`unknown environment "${name}" (known: ${known.join(', ')})`);
  }
  return plugin;
}

/** An in-process environment of kind `name` with `options` (its env.<name> settings) checked against the plugin's schema. */
export function getEnvironment(name: string, options: Record<string, unknown> = {}): Environment {
  const plugin = envPlugin(name);
  const parsed = plugin.options.safeParse(options);
  if (!parsed.success) throw new Error(`${name}: ${parsed.error.issues.map((i) => `${i.path.join('.') || '(options)'}: ${i.message}`).join('; ')}`);
  return plugin.create(parsed.data);
}
