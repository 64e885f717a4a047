import * as path from 'node:path';
import { defineCommand } from 'citty';
import { destroyRuntime, initRuntime } from '../gpu/runtime.ts';
import { SERVER_SPLITS, SPLITS, type TaskSplit } from '../envs/types.ts';
import { ENV_NAMES, type EnvName } from '../config/config.ts';
import { readScaleRecord, type ScaleRecord } from '../config/default_run.ts';
import { formatMeanStd, type GroupStats } from '../report/eval_stats.ts';
import { EVAL_DEFAULTS, evaluate, type EvalReport, type EvalSkills } from '../eval/evaluate.ts';
import { resolveModelSource, type ModelSource } from '../checkpoint/model_source.ts';
import { hubModelDir } from '../hub/hub_model.ts';
import { RETRIEVER_PROTOCOLS } from '../../envs/search/http_retriever.ts';
import { CliError, intArg, numberArg } from './args.ts';
import { gpuArgs, gpuMemoryBytes, gpuOptions } from './gpu_args.ts';

const SPLIT_NAMES: readonly TaskSplit[] = [...new Set<TaskSplit>([...SPLITS, ...SERVER_SPLITS])];

function parseKs(value: string, seeds: number): number[] {
  const ks = value.split(',').map((s) => intArg('--k', s.trim(), 1));
  for (const k of ks) if (k > seeds) throw new CliError(`--k ${value}: pass@${k} needs at least ${k} runs per task, but --seeds is ${seeds}`);
  return [...new Set(ks)].sort((a, b) => a - b);
}

/** The report as a table: one row for all tasks, then one per task type. */
export function formatEvalTable(r: EvalReport): string {
  const shop = r.summary.score !== null;
  const head = ['', 'tasks', 'episodes', `success (mean ± std over ${r.seeds} sampling seeds)`, ...r.ks.map((k) => `pass@${k}`), ...(shop ? ['score (mean ± std)'] : [])];
  const row = (name: string, g: GroupStats) => [
    name, String(g.tasks), String(g.episodes), formatMeanStd(g.success),
    ...r.ks.map((k) => (g.passAtK[k] === undefined ? '-' : g.passAtK[k].toFixed(3))),
    ...(shop ? [g.score ? formatMeanStd(g.score) : '-'] : []),
  ];
  const rows = [head, row('all', r.summary), ...Object.entries(r.summary.byType).map(([t, g]) => row(t, g))];
  const widths = head.map((_, c) => Math.max(...rows.map((cells) => cells[c].length)));
  const line = (cells: string[]) => cells.map((s, c) => (c === 0 ? s.padEnd(widths[c]) : s.padStart(widths[c]))).join('  ').trimEnd();
  return [line(rows[0]), widths.map((w) => '-'.repeat(w)).join('  '), ...rows.slice(1).map(line)].join('\n');
}

/** The run directory a model path belongs to, when it is a run or one of its checkpoints. */
function runDirOf(source: ModelSource): string | null {
  if (source.kind === 'run') return source.input;
  if (source.kind === 'checkpoint' && source.runConfig) return path.dirname(path.dirname(path.resolve(source.checkpoint!)));
  return null;
}

/** The run settings evaluation inherits, by the flag that replaces each. */
const INHERITED: readonly [key: string, flag: string][] = [
  ['rollout.maxTurns', '--max-turns'],
  ['rollout.maxResponseTokens', '--max-response-tokens'],
  ['validation.tasks', '--tasks'],
];

/**
 * Why a run scaled down for the software GPU evaluates to zeros: evaluation takes the
 * run's (scaled) episode length and panel unless told otherwise. Null when it was not
 * scaled, or every such setting is given on the command line.
 */
export function scaledRunNote(dir: string, record: ScaleRecord, given: ReadonlySet<string>): string | null {
  const inherited = INHERITED.flatMap(([key, flag]) => {
    const change = record.changes.find((c) => c.startsWith(`${key} `));
    const m = change && /^\S+ (\S+) -> (\S+)$/.exec(change);
    return m && !given.has(flag) ? [{ key, flag, from: m[1], to: m[2] }] : [];
  });
  if (!inherited.length) return null;
  return `note: ${dir} was scaled down for the software GPU (${record.adapter}) when it trained, and evaluation takes the run's ` +
    `${inherited.map((s) => `${s.key} ${s.to}`).join(', ')}: episodes that short rarely finish a task, so expect success near 0. ` +
    `Pass ${inherited.map((s) => `${s.flag} ${s.from}`).join(' ')} to evaluate with the configured settings.`;
}

/** The search flags as env.search settings (the dataset replaces both held-out files), or undefined when none is given. */
function searchOptions(args: Record<string, unknown>, env: string): Record<string, unknown> | undefined {
  const given = SEARCH_FLAGS.filter((f) => args[f] !== undefined);
  if (given.length === 0) return undefined;
  if (env !== 'search') throw new CliError(`--${given[0]}: only the search environment has question files and a retriever, not ${env}`);
  const protocol = args['retriever-protocol'] as string | undefined;
  if (protocol !== undefined && !(RETRIEVER_PROTOCOLS as readonly string[]).includes(protocol)) throw new CliError(`--retriever-protocol ${protocol}: expected ${RETRIEVER_PROTOCOLS.join(' or ')}`);
  const retriever = Object.fromEntries(Object.entries({
    url: args.retriever,
    protocol,
    topk: args.topk === undefined ? undefined : intArg('--topk', args.topk as string, 1),
  }).filter(([, v]) => v !== undefined));
  const dataset = args.dataset as string | undefined;
  return { ...(dataset === undefined ? {} : { test: path.resolve(dataset), validation: undefined }), retriever };
}

const SEARCH_FLAGS = ['dataset', 'retriever', 'retriever-protocol', 'topk'] as const;

export const evalCommand = defineCommand({
  meta: {
    name: 'eval',
    description: 'Evaluate a model on a fixed task panel, every task run once per sampling seed (--seeds S): success mean ± std over the S runs, pass@k, per task type (shop: native score). ' +
      'MODEL is a Hugging Face model directory, a training checkpoint, a run directory (its latest checkpoint) or a Hub model id.',
  },
  args: {
    model: { type: 'positional', required: true, description: 'model directory, training checkpoint (ckpt-N), run directory (its latest checkpoint) or Hub model id (owner/name)' },
    env: { type: 'string', description: `environment: ${ENV_NAMES.join(', ')} (default: the run's, else household)` },
    'env-url': { type: 'string', description: "the environment's server (default: the run's env.url, else the built-in environment)" },
    agentgym: { type: 'boolean', description: "the server is AgentGym's (--no-agentgym: ours); default: the run's env.agentgym" },
    dataset: { type: 'string', description: "search: the held-out questions to evaluate, a Search-R1 file (JSONL or parquet), instead of the run's validation and test files; every question by default" },
    retriever: { type: 'string', description: "search: a retrieval server's /retrieve URL (env.search.retriever.url; default: the run's)" },
    'retriever-protocol': { type: 'string', description: "search: search-r1 ({\"queries\"}) or sdar ({\"query\"}) (env.search.retriever.protocol)" },
    topk: { type: 'string', description: 'search: passages per search (env.search.retriever.topk)' },
    seeds: { type: 'string', description: "S: sampling seeds, each a run of every task (not training seeds: the model is trained already)", default: String(EVAL_DEFAULTS.seeds) },
    tasks: { type: 'string', description: "panel size (default: the environment's validation.tasks; AgentGym or a search dataset: the whole split)" },
    split: { type: 'string', description: 'task split: train, valid_seen, valid_unseen (default: validation.split); AgentGym: train, validation, test (default: test)' },
    'panel-seed': { type: 'string', description: "environment seed of the panel's first task (default: validation.seed; not with AgentGym, whose tasks are its indices)" },
    temperature: { type: 'string', description: 'sampling temperature; 0 is greedy (identical across seeds)', default: String(EVAL_DEFAULTS.temperature) },
    'max-turns': { type: 'string', description: "turn cap per episode (default: the environment's rollout.maxTurns)" },
    'max-response-tokens': { type: 'string', description: 'tokens per response (default: rollout.maxResponseTokens)' },
    'sampling-seed': { type: 'string', description: 'base of the sampling seeds (default: the panel seed, as validation does)' },
    'max-batch': { type: 'string', description: "episodes decoded together (default: the run's rollout.maxBatch, else 64); changes the speed, not the episodes" },
    skills: { type: 'boolean', description: "put the skills block (the teacher's privileged context) in the model's own prompt, cards chosen as Skill-GRPO's", default: false },
    'teacher-prompt': { type: 'boolean', description: "let the model read the teacher's prompt, skills placed and chosen as the self-distillation methods' teacher (teacher.skillsPlacement)", default: false },
    k: { type: 'string', description: 'pass@k for these k, comma-separated, each <= --seeds (default: 1,2,4,8 up to --seeds)' },
    out: { type: 'string', description: 'JSON report: settings, summary and every episode' },
    trajectories: { type: 'string', description: 'every trajectory as JSONL' },
    progress: { type: 'string', description: 'auto, bar, plain or none', default: 'auto' },
    engine: { type: 'string', description: 'local (the model runs here) or http (what --url serves; MODEL gives the tokenizer and settings)', default: 'local' },
    url: { type: 'string', description: 'with --engine http: the server (vLLM, our serve) base URL, or several, comma-separated; API key from VLLM_API_KEY or OPENAI_API_KEY' },
    'served-model': { type: 'string', description: 'with --engine http: the served model or LoRA adapter name to ask for (default: the base model)' },
    'server-wait': { type: 'string', description: 'with --engine http: seconds to wait for a server that does not answer, one that refuses connections at the start included (default: 300, and a server refusing connections stops eval at once)' },
    ...gpuArgs,
  },
  async run({ args }) {
    const seeds = intArg('--seeds', args.seeds, 1);
    if (args.skills && args['teacher-prompt']) throw new CliError('--skills and --teacher-prompt: choose one (the model\'s own prompt, or the teacher\'s)');
    const env = args.env as EnvName | undefined;
    if (env !== undefined && !ENV_NAMES.includes(env)) throw new CliError(`--env ${env}: expected one of ${ENV_NAMES.join(', ')}`);
    const split = args.split as TaskSplit | undefined;
    if (split !== undefined && !SPLIT_NAMES.includes(split)) throw new CliError(`--split ${split}: expected one of ${SPLIT_NAMES.join(', ')}`);
    const progress = args.progress as 'auto' | 'bar' | 'plain' | 'none';
    if (!['auto', 'bar', 'plain', 'none'].includes(progress)) throw new CliError(`--progress ${args.progress}: expected auto, bar, plain or none`);
    const opt = (flag: string, v: string | undefined, min: number) => (v === undefined ? undefined : intArg(flag, v, min));
    if (args.engine !== 'local' && args.engine !== 'http') throw new CliError(`--engine ${args.engine}: expected local or http`);
    if (args.engine === 'http' && !args.url) throw new CliError('--engine http: give the server with --url');
    if (args.engine === 'local' && (args.url || args['served-model'] || args['server-wait'])) throw new CliError('--url, --served-model and --server-wait need --engine http');
    const server = args.engine === 'http'
      ? {
        urls: args.url!.split(',').map((u) => u.trim()).filter(Boolean), model: args['served-model'], apiKey: process.env.VLLM_API_KEY || process.env.OPENAI_API_KEY || undefined,
        waitSeconds: args['server-wait'] === undefined ? undefined : numberArg('--server-wait', args['server-wait'], 0),
      }
      : undefined;
    // The model path is checked (a Hub id downloaded) before the GPU starts.
    const model = await hubModelDir(args.model);
    const source = resolveModelSource(model, 'MODEL');
    const opts = {
      model,
      env,
      envUrl: args['env-url'],
      agentgym: args.agentgym as boolean | undefined,
      envOptions: searchOptions(args, env ?? source.runConfig?.env.name ?? 'household'),
      seeds,
      split,
      tasks: opt('--tasks', args.tasks, 1),
      panelSeed: opt('--panel-seed', args['panel-seed'], 0),
      temperature: numberArg('--temperature', args.temperature, 0),
      maxTurns: opt('--max-turns', args['max-turns'], 1),
      maxResponseTokens: opt('--max-response-tokens', args['max-response-tokens'], 1),
      samplingSeed: opt('--sampling-seed', args['sampling-seed'], 0),
      maxBatch: opt('--max-batch', args['max-batch'], 1),
      memoryBytes: gpuMemoryBytes(args),
      ks: args.k === undefined ? undefined : parseKs(args.k, seeds),
      skills: (args.skills ? 'prompt' : args['teacher-prompt'] ? 'teacher' : 'none') as EvalSkills,
      out: args.out,
      trajectories: args.trajectories,
      progress,
      server,
    };
    const dir = runDirOf(source);
    const record = dir ? readScaleRecord(dir) : null;
    const given = new Set(INHERITED.map(([, flag]) => flag).filter((flag) => args[flag.slice(2)] !== undefined));
    const note = dir && record ? scaledRunNote(dir, record, given) : null;
    if (note) console.log(note);
    await initRuntime(gpuOptions(args));
    try {
      const report = await evaluate(opts);
      console.log(formatEvalTable(report));
      if (note && report.summary.success.mean === 0) console.log('success 0: the run was scaled down for the software GPU (see the note above)');
      if (report.failed.length) console.log(`${report.failed.length} episodes failed in the environment and are left out`);
      console.log(`${report.tokensGenerated} tokens generated in ${report.wallSeconds.toFixed(1)}s${opts.out ? `; report ${opts.out}` : ''}`);
    } finally {
      destroyRuntime();
    }
  },
});
