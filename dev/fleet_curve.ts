// The same run on the local engine and on a fleet of `serve` processes, side by side:
// issue 40 asks that rollouts on servers give the learning curve the local engine
// gives. Starts `--servers` `serve` processes of the run's model, trains once with the
// local engine and once with rollout.url naming them (same config, same seeds), and
// prints per iteration the two runs' metrics and how many of the iteration's episodes
// have the same responses in both, with the fleet's episodes per server.
//
//   bun dev/fleet_curve.ts --out /tmp/curve [--servers 2] [--model models/household-tiny] -- [train overrides...]
//
// The overrides go to both runs (`train` without a config file is the embedded default).

import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { readMetrics } from '../src/report/metrics.ts';
import { readTrajectoryLog } from '../src/rollout/trajectory_log.ts';

const ROOT = path.dirname(path.dirname(fileURLToPath(import.meta.url)));
const MAIN = path.join(ROOT, 'src', 'cli', 'main.ts');

const { values, positionals } = parseArgs({
  options: { out: { type: 'string' }, servers: { type: 'string', default: '2' }, model: { type: 'string', default: path.join(ROOT, 'models', 'household-tiny') } },
  allowPositionals: true,
});
if (!values.out) throw new Error('--out DIR is required');
const out = path.resolve(values.out);
fs.mkdirSync(out, { recursive: true });
const env = { ...process.env, EGL_PLATFORM: process.env.EGL_PLATFORM ?? 'surfaceless' };

const children: ChildProcess[] = [];
process.on('exit', () => children.forEach((c) => c.kill('SIGKILL')));

function serve(): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [MAIN, 'serve', values.model!, '--port', '0', '--served-model-name', 'policy', '--allowed-root', out], { cwd: ROOT, env });
    children.push(child);
    let text = '';
    const seen = (d: Buffer) => {
      text += d;
      const m = /serving .* at (http:\/\/\S+)/.exec(text);
      if (m) resolve(m[1]);
    };
    child.stdout.on('data', seen);
    child.stderr.on('data', seen);
    child.on('exit', (code) => reject(new Error(`serve exited ${code}: ${text}`)));
  });
}

function train(args: string[]): Promise<number> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [MAIN, 'train', ...args], { cwd: ROOT, env, stdio: ['ignore', 'inherit', 'inherit'] });
    child.on('close', (code) => resolve(code ?? 1));
  });
}

const urls = await Promise.all(Array.from({ length: Number(values.servers) }, serve));
const common = [...positionals, `output.dir=${out}`, 'output.progress=none'];
const started = { local: performance.now(), fleet: 0 };
if ((await train([...common, 'output.runName=local'])) !== 0) throw new Error('the local run failed');
started.fleet = performance.now();
const localSeconds = (started.fleet - started.local) / 1000;
if ((await train([...common, 'output.runName=fleet', 'rollout.engine=http', `rollout.url=${JSON.stringify(urls)}`])) !== 0) throw new Error('the fleet run failed');
const fleetSeconds = (performance.now() - started.fleet) / 1000;

const commit = execFileSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: ROOT, encoding: 'utf8' }).trim();
const [local, fleet] = ['local', 'fleet'].map((run) => readMetrics(path.join(out, run, 'metrics.jsonl')));
const keys = ['rollout/success', 'rollout/return', 'actor/pg_loss', 'actor/kl', 'actor/entropy', 'actor/grad_norm', 'val/success'];
const fmt = (v: unknown) => (typeof v === 'number' ? v.toFixed(4) : '–');
console.log(`\ncommit ${commit}; overrides: ${positionals.join(' ') || '(none)'}; ${urls.length} serve processes; local ${localSeconds.toFixed(0)} s, fleet ${fleetSeconds.toFixed(0)} s`);
console.log(`| iteration | ${keys.map((k) => `${k} local / fleet`).join(' | ')} | same responses | fleet episodes per server |`);
console.log(`|---|${keys.map(() => '---').join('|')}|---|---|`);
for (const [i, row] of local.entries()) {
  const it = row.iteration as number;
  const [a, b] = ['local', 'fleet'].map((run) => readTrajectoryLog(path.join(out, run, 'rollouts', `iter-${it}.jsonl`)));
  const responses = (t: (typeof b)[number]) => JSON.stringify(t.turns.map((u) => u.response));
  const fleetById = new Map(b.map((t) => [t.trajectoryId, responses(t)]));
  const same = a.filter((t) => fleetById.get(t.trajectoryId) === responses(t)).length;
  const perServer = urls.map((u) => b.filter((t) => t.server === u).length).join(' + ');
  console.log(`| ${it} | ${keys.map((k) => `${fmt(row[k])} / ${fmt(fleet[i]?.[k])}`).join(' | ')} | ${same} of ${a.length} | ${perServer} |`);
}
process.exit(0);
