import { defineCommand } from 'citty';
import { environmentNames, envPlugin, getEnvironment } from '../../envs/registry.ts';
import { serveEnvironment } from '../../envs/server.ts';
import { AGENTGYM_STAND_INS } from '../../envs/agentgym/index.ts';
import { SPLITS, type Environment, type Split } from '../envs/types.ts';
import { loadConfig } from '../config/config.ts';
import { makeEnvironment } from '../envs/environment.ts';
import { CliError, intArg } from './args.ts';

/** The in-process environment `name` with its settings given as key=value words (its env.<name> block of a config). */
function environmentWithSettings(name: string, words: readonly string[]): Environment {
  const settings = words.filter((w) => w !== name);
  const bad = settings.find((w) => !w.includes('='));
  if (bad !== undefined) throw new CliError(`env ${name}: expected key=value settings of env.${name}, got "${bad}"`);
  if (!environmentNames().includes(name)) return getEnvironment(name);
  return makeEnvironment(loadConfig(undefined, [`env.name=${name}`, ...settings.map((s) => `env.${name}.${s}`)]));
}

function splitArg(v: string | undefined): Split {
  const s = (v ?? 'train') as Split;
  if (!SPLITS.includes(s)) throw new CliError(`--split ${v}: expected one of ${SPLITS.join(', ')}`);
  return s;
}

const serve = defineCommand({
  meta: { name: 'serve', description: 'Serve an environment over HTTP (protocol in docs/PROTOCOLS.md section 4); settings as key=value words, e.g. `env serve household grammar=put`' },
  args: {
    name: { type: 'positional', description: `environment: ${environmentNames().join(', ')}`, required: true },
    port: { type: 'string', description: 'port', default: '8101' },
    host: { type: 'string', description: 'address to bind', default: '127.0.0.1' },
    'retriever-url': { type: 'string', description: 'search: a retrieval server\'s /retrieve endpoint instead of the built-in corpus (env.search.retriever.url)' },
    agentgym: { type: 'boolean', description: "answer as AgentGym's server for the environment does (household: agentenv-alfworld, shop: agentenv-webshop), playing ours; docs/AGENTGYM.md", default: false },
  },
  async run({ args }) {
    if (args.agentgym) return serveStandIn(args.name, args.host, intArg('--port', args.port, 0, 65535), args._ as string[]);
    const url = args['retriever-url'];
    if (url !== undefined && args.name !== 'search') throw new CliError(`--retriever-url: only the search environment has a retriever, not ${args.name}`);
    const env = environmentWithSettings(args.name, [...(args._ as string[]), ...(url === undefined ? [] : [`retriever.url=${url}`])]);
    const handle = await serveEnvironment(env, { host: args.host, port: intArg('--port', args.port, 0, 65535) });
    console.log(`${env.name} environment serving at ${handle.url}`);
    const stop = async () => {
      await handle.close();
      process.exit(0);
    };
    process.on('SIGINT', stop);
    process.on('SIGTERM', stop);
  },
});

/** Serves the stand-in for AgentGym's server of environment `name` until interrupted. */
async function serveStandIn(name: string, host: string, port: number, words: readonly string[]): Promise<void> {
  const agentgym = envPlugin(name).agentgym;
  const serve = agentgym && AGENTGYM_STAND_INS[agentgym.name];
  if (!serve) throw new CliError(`--agentgym: ${name} has no AgentGym server (have ${Object.keys(AGENTGYM_STAND_INS).join(', ')})`);
  if (words.some((w) => w !== name)) throw new CliError(`--agentgym: AgentGym's ${agentgym!.name} server takes no settings, got ${words.filter((w) => w !== name).join(' ')}`);
  const handle = await serve({ host, port });
  console.log(`stand-in for AgentGym's ${agentgym!.server} serving at ${handle.url} (train with env.name=${envPlugin(name).name} env.agentgym=true env.url=${handle.url})`);
  const stop = async () => {
    await handle.close();
    process.exit(0);
  };
  process.on('SIGINT', stop);
  process.on('SIGTERM', stop);
}

const expert = defineCommand({
  meta: { name: 'expert', description: "Play one episode with the environment's expert and print the transcript" },
  args: {
    name: { type: 'positional', description: `environment: ${environmentNames().join(', ')}`, required: true },
    seed: { type: 'string', description: 'task seed', default: '0' },
    split: { type: 'string', description: SPLITS.join(' | '), default: 'train' },
  },
  async run({ args }) {
    const env = getEnvironment(args.name);
    const session = await env.create({ split: splitArg(args.split), seed: intArg('--seed', args.seed, 0) });
    let r = await session.reset();
    console.log(r.observation);
    for (let step = 0; step < env.maxSteps; step++) {
      const action = r.info.expert_action;
      if (typeof action !== 'string') throw new CliError(`${env.name} gives no expert_action at step ${step}`);
      const s = await session.step(action);
      console.log(`> ${action}\n${s.observation}`);
      r = s;
      if (s.done) {
        console.log(`\nreward ${s.reward}, won ${s.info.won}`);
        break;
      }
    }
    await session.close();
  },
});

export const envCommand = defineCommand({
  meta: { name: 'env', description: 'Environments: serve over HTTP, play the expert' },
  subCommands: { serve, expert },
});
