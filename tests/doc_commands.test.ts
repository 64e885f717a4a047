// Every command the README and docs/ show, as a fresh clone would run it. Each command
// line is read out of the Markdown (code blocks, and inline code that starts with a
// command of the project's), split as a shell splits it, and checked:
//   - its program is there on a fresh machine once `npm ci` has run: npx, npm, node, or
//     another project's tool (vllm, python, apt-get ...); never a bare `bun` or `deno`,
//     which npm installs under node_modules, not on the PATH;
//   - the package script, Deno task or file it names exists;
//   - the words given to this program parse with its own parser: the command exists
//     and every flag is one it defines; `train` and `compare` load their config with its
//     overrides through the schema and, for a model on disk, check the model and its
//     context as `train` does before the GPU starts; env's environments, bench's suites,
//     compare's methods and seeds, and a folder `results` reads, exist.
// Every example config validates against its model the same way. Two light commands run
// as written, from a copy of the project: one iteration of a method on the software GPU,
// and the household expert playing an episode. Commands that need what a fresh clone
// lacks (a server, a run made earlier, a Hub model, another project's checkout) are
// checked as far as the words go.

import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { after, describe, test } from 'node:test';
import { parseArgs, type ArgsDef } from 'citty';
import { ENV_NAMES, METHODS } from '../src/config/config_schema.ts';
import { loadConfig } from '../src/config/config.ts';
import { EMBEDDED_RECIPE } from '../src/config/default_run.ts';
import { configWords } from '../src/cli/args.ts';
import { BENCH_SUITES } from '../src/cli/bench.ts';
import { mainCommand } from '../src/cli/commands.ts';
import { parseSeeds } from '../src/cli/compare.ts';
import { assertKnownOptions, resolveCommand } from '../src/cli/strict_args.ts';
import { checkRunInputs } from '../src/trainer/train.ts';
import { ROOT } from './support/cli_process.ts';

const DOCS = ['README.md', 'envs/README.md', ...fs.readdirSync(path.join(ROOT, 'docs')).filter((f) => f.endsWith('.md')).map((f) => `docs/${f}`)];

/** A command line and where it is written. */
interface DocCommand {
  text: string;
  where: string;
  /**
   * In a block `results` writes from an archive: the commands that made its runs, at the
   * commits it names, whose options may since have gone; their program must still be
   * one a fresh clone runs.
   */
  record: boolean;
}

/** Programs of other projects, or of the shell, that a doc may tell the reader to run. */
const EXTERNAL = new Set(['apt-get', 'git', 'python', 'python3', 'pip', 'vllm', 'export', 'for', 'do', 'done', 'mkdir', 'cd', 'docker', 'openssl', 'nvidia-smi', 'hf']);
/** Programs npm installs under node_modules/.bin only: `npx NAME` runs them, NAME alone is "command not found" on a fresh machine. */
const NOT_ON_PATH = new Set(['bun', 'deno', 'tsc', 'webgpu-agent-trainer']);
/** What a code line starts with for it to be read as a command (lines of other code, listings and logs are not). */
const COMMAND_START = new Set(['npx', 'npm', 'node', ...EXTERNAL, ...NOT_ON_PATH]);

/**
 * Commands that run only once something the doc describes is made first, with why:
 * the number-guessing environment exists once the diff beside it is applied.
 */
const NEEDS_THE_DIFF = [/ guess\b/, /env\.name=guess\b/];

/** Where `close` is in `line` from `from`, or the line's end when it never comes (sh would ask for more). */
const upTo = (line: string, close: string, from: number) => (line.indexOf(close, from) < 0 ? line.length : line.indexOf(close, from));

/** The words of a shell command: quotes and backslashes as sh reads them; $(...) and $VAR left as they are. */
function shellWords(line: string): string[] {
  const words: string[] = [];
  let word = '';
  let started = false;
  for (let i = 0; i < line.length; i++) {
    const c = line[i];
    if (c === "'") {
      const end = upTo(line, "'", i + 1);
      word += line.slice(i + 1, end);
      i = end;
      started = true;
    } else if (c === '"') {
      let j = i + 1;
      for (; j < line.length && line[j] !== '"'; j++) word += line[j] === '\\' ? (line[++j] ?? '') : line[j];
      i = j;
      started = true;
    } else if (c === '\\') {
      word += line[++i] ?? '';
      started = true;
    } else if (c === '$' && line[i + 1] === '(') {
      const end = upTo(line, ')', i);
      word += line.slice(i, end + 1);
      i = end;
      started = true;
    } else if (/\s/.test(c)) {
      if (started) words.push(word);
      word = '';
      started = false;
    } else {
      word += c;
      started = true;
    }
  }
  if (started) words.push(word);
  return words;
}

/** The simple commands of a line: split at &&, ||, ;, | and &, outside quotes; a comment (# after a space) ends the line. */
function simpleCommands(line: string): string[] {
  const out: string[] = [];
  let cur = '';
  let quote: string | null = null;
  for (let i = 0; i < line.length; i++) {
    const c = line[i];
    if (quote) {
      if (c === quote) quote = null;
      cur += c;
      continue;
    }
    if (c === "'" || c === '"') quote = c;
    if (c === '#' && (i === 0 || /\s/.test(line[i - 1]))) break;
    // 2>&1 and &> redirect; they do not end a command.
    if (c === '&' && (line[i - 1] === '>' || line[i + 1] === '>')) {
      cur += c;
      continue;
    }
    if (c === '&' || c === '|' || c === ';') {
      if (line[i + 1] === c) i++;
      out.push(cur);
      cur = '';
      continue;
    }
    cur += c;
  }
  out.push(cur);
  return out.map((s) => s.trim()).filter(Boolean);
}

const PLACEHOLDER = 'PLACEHOLDER';

/** Inline command syntax read as the reader would type it: `[--flag x]` optional (taken), `a|b` alternatives (the first), `<name>` a placeholder. */
function typedForm(span: string): string {
  return span.replace(/\[([^\]]*)\]/g, (_, inner: string) => inner.replace(/(\S+)\|\S+/g, '$1')).replace(/<[^>]*>/g, PLACEHOLDER);
}

/** Every command line in `file`: code lines that start with a command, joined over trailing backslashes, and inline code that is a command of this project's. */
function docCommands(file: string): DocCommand[] {
  const lines = fs.readFileSync(path.join(ROOT, file), 'utf8').split('\n');
  const out: DocCommand[] = [];
  let fence: string | null = null;
  let record = false;
  let paragraph: { text: string; line: number } | null = null;
  const flush = () => {
    if (!paragraph) return;
    for (const m of paragraph.text.matchAll(/`([^`]+)`/g)) {
      const span = m[1].trim();
      if (/^(npx |npm (ci|test|run)\b|node dist\/|bun (run \S|\S+\.ts)|deno task |webgpu-agent-trainer )/.test(span)) {
        out.push({ text: typedForm(span), where: `${file}:${paragraph.line}`, record });
      }
    }
    paragraph = null;
  };
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i];
    if (/^<!--.*-->$/.test(line.trim())) {
      flush();
      if (/^<!-- results:\S+:begin/.test(line.trim())) record = true;
      if (/^<!-- results:\S+:end/.test(line.trim())) record = false;
      continue;
    }
    if (/^\s*```/.test(line)) {
      flush();
      fence = fence === null ? line.trim().slice(3) : null;
      continue;
    }
    const code = fence !== null ? (['', 'sh', 'bash', 'shell'].includes(fence) ? line : null) : /^ {4}/.test(line) ? line.slice(4) : null;
    if (code !== null) {
      flush();
      let text = code.trim();
      const at = i + 1;
      while (text.endsWith('\\') && i + 1 < lines.length) text = `${text.slice(0, -1).trimEnd()} ${lines[++i].trim()}`;
      const first = shellWords(simpleCommands(text)[0] ?? '').find((w) => !/^[A-Za-z_][A-Za-z0-9_]*=/.test(w));
      if (first !== undefined && COMMAND_START.has(first)) out.push({ text, where: `${file}:${at}`, record });
      continue;
    }
    if (fence !== null) continue;
    if (line.trim() === '') flush();
    else if (paragraph) paragraph.text += ` ${line}`;
    else paragraph = { text: line, line: i + 1 };
  }
  flush();
  return out;
}

const packageJson = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { scripts: Record<string, string> };
const denoJson = JSON.parse(fs.readFileSync(path.join(ROOT, 'deno.json'), 'utf8')) as { tasks: Record<string, string> };

/** The words a script hands the CLI before the reader's: `bun src/cli/main.ts train` gives ["train"]; null when the script does not run the CLI. */
function cliPrefix(script: string): string[] | null {
  const words = script.split(/\s+/);
  const at = words.findIndex((w) => /(^|\/)src\/cli\/main\.ts$/.test(w));
  return at < 0 ? null : words.slice(at + 1);
}

/** citty's reading of `words` for `args`. */
function parsed(words: string[], args: ArgsDef): Record<string, unknown> & { _: string[] } {
  return parseArgs(words, args) as Record<string, unknown> & { _: string[] };
}

const placeholders = fs.mkdtempSync(path.join(os.tmpdir(), 'wgt-doc-inputs-'));
after(() => fs.rmSync(placeholders, { recursive: true, force: true }));

/**
 * The config of a command line, loaded as the command loads it, from the repository's
 * root: input files a doc has the reader make first (Search-R1's question files) stand
 * in as empty files, since the schema checks only that they exist.
 */
function configOf(file: string | undefined, overrides: string[]) {
  const inputs = overrides.map((o) => {
    const m = /^(env\.search\.(?:train|validation|test|corpus))=(.+)$/.exec(o);
    if (!m || fs.existsSync(path.join(ROOT, m[2]))) return o;
    const stand = path.join(placeholders, m[2]);
    fs.mkdirSync(path.dirname(stand), { recursive: true });
    fs.writeFileSync(stand, '');
    return `${m[1]}=${stand}`;
  });
  return loadConfig(file === undefined ? undefined : path.join(ROOT, file), inputs);
}

/** The config a train command line runs (shortcuts and the embedded default included). */
function trainConfig(words: string[], args: ArgsDef) {
  const a = parsed(words, args);
  const { file, overrides } = configWords('train', a._.filter((w) => !/^ckpt-\d+$/.test(w)));
  if (a.method) overrides.push(`method=${a.method}`);
  if (a.iterations) overrides.push(`iterations=${a.iterations}`);
  if (a['gpu-memory'] !== undefined) overrides.push(`gpu.memory=${a['gpu-memory']}`);
  return configOf(file, file ? overrides : [...EMBEDDED_RECIPE, ...overrides]);
}

/** What `train` checks before the GPU starts, for a model on disk: the model's files, its context against the token budgets, the memory plan. */
function checkModel(cfg: ReturnType<typeof loadConfig>): void {
  if (fs.existsSync(path.join(ROOT, cfg.model.path))) checkRunInputs({ ...cfg, model: { ...cfg.model, path: path.join(ROOT, cfg.model.path) } });
}

/** The checks of this program's words (after the program or script name); a template whose command is a placeholder has none. */
function checkCli(words: string[]): void {
  if (words[0] === PLACEHOLDER) return;
  assertKnownOptions(mainCommand, words);
  const { name, args, words: rest, incomplete } = resolveCommand(mainCommand, words);
  if (incomplete) assert.ok(rest.includes('--help'), `${name || 'the program'} needs a command`);
  const a = parsed(rest, args);
  switch (name) {
    case 'train':
      checkModel(trainConfig(rest, args));
      break;
    case 'compare': {
      const { file, overrides } = configWords('compare', a._.filter(given));
      const methods = String(a.methods ?? 'grpo').split(',');
      if (!given(file ?? '') || !methods.every(given)) break;
      for (const m of methods) assert.ok((METHODS as readonly string[]).includes(m), `compare: no method ${m}`);
      if (given(String(a.seeds ?? '3'))) parseSeeds(String(a.seeds ?? '3'));
      for (const m of methods) checkModel(configOf(file, [...overrides, `method=${m}`]));
      break;
    }
    case 'env serve':
    case 'env expert':
      if (given(a._[0])) assert.ok(ENV_NAMES.includes(a._[0]), `${name}: no environment ${a._[0]}`);
      break;
    case 'bench':
      for (const suite of String(a.only ?? '').split(',').filter(Boolean)) assert.ok(BENCH_SUITES.includes(suite), `bench: no suite ${suite}`);
      break;
    case 'results':
      if (given(a._[0])) assert.ok(fs.existsSync(path.join(ROOT, a._[0])), `results: no folder ${a._[0]}`);
      break;
  }
}

/** Whether a word is written out rather than a placeholder of a syntax template (`<name>`). */
const given = (word: string) => !word.includes(PLACEHOLDER);

/** Checks one simple command as a fresh clone would run it; of a record, its program alone. */
function checkCommand(command: string, record = false): void {
  const cli = record ? () => undefined : checkCli;
  const all = shellWords(command);
  const words = all.slice(all.findIndex((w) => !/^[A-Za-z_][A-Za-z0-9_]*=/.test(w)));
  const [program, ...rest] = words;
  if (program === undefined || EXTERNAL.has(program)) return;
  assert.ok(!NOT_ON_PATH.has(program), `${program} is not on a fresh machine's PATH (npm installs it under node_modules/.bin): write npx ${program}`);
  if (program === 'npm') {
    const [verb, script] = rest;
    if (verb === 'run') assert.ok(script in packageJson.scripts, `npm run ${script}: no such script in package.json`);
    else assert.ok(['ci', 'install', 'test'].includes(verb), `npm ${verb}: not a command a fresh clone runs`);
    return;
  }
  if (program === 'node') {
    const [file, ...args] = rest;
    const source = file.replace(/^dist\//, '').replace(/\.js$/, '.ts');
    assert.ok(file.startsWith('dist/') && (!given(file) || fs.existsSync(path.join(ROOT, source))), `node ${file}: npm run build makes dist/ from ${source}, which does not exist`);
    if (source === 'src/cli/main.ts') cli(args);
    return;
  }
  assert.equal(program, 'npx', `${program}: not a program a fresh clone has`);
  const [tool, ...args] = rest;
  if (tool === 'webgpu-agent-trainer') return cli(args);
  if (tool === 'deno') {
    assert.equal(args[0], 'task', 'npx deno: the docs run its tasks');
    const task = denoJson.tasks[args[1]];
    assert.ok(task, `deno task ${args[1]}: no such task in deno.json`);
    const prefix = cliPrefix(task);
    if (prefix) cli([...prefix, ...args.slice(2)]);
    return;
  }
  assert.equal(tool, 'bun', `npx ${tool}: not a package of the project`);
  if (args[0] === 'run') {
    const script = packageJson.scripts[args[1]];
    assert.ok(script, `bun run ${args[1]}: no such script in package.json`);
    const prefix = cliPrefix(script);
    if (prefix) cli([...prefix, ...args.slice(2)]);
    return;
  }
  assert.ok(!given(args[0]) || fs.existsSync(path.join(ROOT, args[0])), `bun ${args[0]}: no such file`);
  if (args[0] === 'src/cli/main.ts') cli(args.slice(1));
}

const documented = DOCS.flatMap(docCommands);

describe('documented commands', () => {
  test('the docs hold the commands this test reads', () => {
    const texts = documented.map((c) => c.text);
    // The README's two commands, and lines of each kind of place a command is written.
    for (const must of ['npm ci && npx bun run train', 'npm ci && npm test', 'npx bun run cli results docs/results/household', 'VLLM_SERVER_DEV_MODE=1 vllm serve Qwen/Qwen2.5-0.5B-Instruct']) {
      assert.ok(texts.some((t) => t.startsWith(must)), `no documented command starts with ${must}`);
    }
    assert.ok(documented.length > 100, `${documented.length} commands`);
    assert.deepEqual(shellWords(`a 'b c' "d \\"e\\"" f\\ g $(git rev-parse --short HEAD)`), ['a', 'b c', 'd "e"', 'f g', '$(git rev-parse --short HEAD)']);
    assert.deepEqual(simpleCommands('npm ci && npx bun run train   # the default'), ['npm ci', 'npx bun run train']);
  });

  for (const doc of DOCS) {
    test(`${doc}: every command runs as written on a fresh clone`, () => {
      const failures: string[] = [];
      for (const c of documented.filter((d) => d.where.startsWith(`${doc}:`))) {
        if (NEEDS_THE_DIFF.some((re) => re.test(c.text))) continue;
        for (const command of simpleCommands(c.text)) {
          try {
            checkCommand(command, c.record);
          } catch (e) {
            failures.push(`${c.where}: ${command}\n    ${(e as Error).message.split('\n')[0]}`);
          }
        }
      }
      assert.deepEqual(failures, []);
    });
  }

  test('every example config validates, against its model when it is on disk', () => {
    for (const file of fs.readdirSync(path.join(ROOT, 'examples')).filter((f) => f.endsWith('.yaml'))) {
      assert.doesNotThrow(() => checkModel(configOf(path.join('examples', file), [])), file);
    }
  });
});

describe('light documented commands, run as written', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'wgt-doc-commands-'));
  after(() => fs.rmSync(dir, { recursive: true, force: true }));
  for (const sub of ['src', 'shaders', 'envs', 'examples']) fs.cpSync(path.join(ROOT, sub), path.join(dir, sub), { recursive: true });
  for (const f of ['package.json', 'deno.json']) fs.copyFileSync(path.join(ROOT, f), path.join(dir, f));
  for (const sub of ['models', 'node_modules']) fs.symlinkSync(path.join(ROOT, sub), path.join(dir, sub));

  /** A documented line run by sh from the copy, in a fresh shell's environment (no EGL_PLATFORM, no XDG_RUNTIME_DIR). */
  const run = (line: string) => {
    assert.ok(documented.some((c) => simpleCommands(c.text).includes(line)), `${line} is not documented as written`);
    const env = { ...process.env };
    delete env.EGL_PLATFORM;
    delete env.XDG_RUNTIME_DIR;
    const r = spawnSync('sh', ['-c', line], { cwd: dir, env, encoding: 'utf8', timeout: 300_000 });
    return { code: r.status, out: `${r.stdout}${r.stderr}` };
  };

  test('one iteration of a method on the software GPU', { timeout: 360_000 }, () => {
    const r = run('npx bun run train examples/smoke.yaml --method sdar');
    assert.equal(r.code, 0, r.out);
    assert.match(r.out, /iter 1\/1 \| success/);
  });

  test('the expert plays an episode', { timeout: 120_000 }, () => {
    const r = run('npx bun run env expert household --seed 3');
    assert.equal(r.code, 0, r.out);
    assert.match(r.out, /^reward 10, won true$/m);
  });
});
