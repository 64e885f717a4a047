import { defineCommand } from 'citty';
import { environmentNames, getEnvironment } from '../../envs/registry.ts';
import { serveEnvironment } from '../../envs/server.ts';
import { SPLITS, type Split } from '../envs/types.ts';
import { CliError, intArg } from './args.ts';

function splitArg(v: string | undefined): Split {
  const s = (v ?? 'train') as Split;
  if (!SPLITS.includes(s)) throw new CliError(`--split ${v}: expected one of ${SPLITS.join(', ')}`);
  return s;
}

const serve = defineCommand({
  meta: { name: 'serve', description: 'Serve an environment over HTTP (protocol in envs/README.md)' },
  args: {
    name: { type: 'positional', description: `environment: ${environmentNames().join(', ')}`, required: true },
    port: { type: 'string', description: 'port (default 8101)', default: '8101' },
    host: { type: 'string', description: 'address to bind (default 127.0.0.1)', default: '127.0.0.1' },
  },
  async run({ args }) {
    const env = getEnvironment(args.name);
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
