// `--help` through the CLI as a pipe sees it: wrapped to 80 columns, no colour codes,
// each default once, usage lines naming the command package.json's bin installs (which
// `npx` runs), and a mistyped command answered with the one meant.

import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, test } from 'node:test';
import { usageStyle } from '../src/cli/usage.ts';

const ROOT = path.dirname(path.dirname(fileURLToPath(import.meta.url)));
const CLI = path.join(ROOT, 'src', 'cli', 'main.ts');
const PACKAGE = JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { name: string; bin?: Record<string, string> };

const cli = (args: string[], env: NodeJS.ProcessEnv = {}) => {
  const r = spawnSync(process.execPath, [CLI, ...args], { encoding: 'utf8', env: { ...process.env, NO_COLOR: '', ...env } });
  return { code: r.status, out: r.stdout, err: r.stderr };
};

const COMMANDS = [[], ['bench'], ['compare'], ['env'], ['env', 'serve'], ['env', 'expert'], ['eval'], ['export'], ['gpu'], ['make-default-model'], ['results'], ['score'], ['train'], ['serve'], ['web']];

/** The help's entries (an option or argument with its description's lines), as one string each. */
function entries(help: string): string[] {
  const out: string[] = [];
  for (const line of help.split('\n')) {
    if (/^ {2}\S/.test(line)) out.push(line.trim());
    else if (/^ {3,}\S/.test(line) && out.length) out[out.length - 1] += ` ${line.trim()}`;
  }
  return out;
}

describe('--help', () => {
  for (const words of COMMANDS) {
    test(`${words.join(' ') || '(no command)'}: 80 columns, no colour, each default once, the installed command's name`, () => {
      const r = cli([...words, '--help']);
      assert.equal(r.code, 0, r.err);
      assert.doesNotMatch(r.out, /\x1b\[/, 'colour codes in a pipe');
      for (const line of r.out.split('\n')) {
        assert.ok(line.length <= 80, `${line.length} columns: ${JSON.stringify(line)}`);
        assert.equal(line, line.trimEnd(), `trailing blanks: ${JSON.stringify(line)}`);
      }
      assert.match(r.out, new RegExp(`^Usage: ${PACKAGE.name}${words.map((w) => ` ${w}`).join('')}( |$)`, 'm'));
      // An option's default value is printed after its description, which then says no other.
      for (const entry of entries(r.out).filter((e) => /\[default: [^\]]*\]$/.test(e))) assert.equal(entry.match(/default/gi)!.length, 1, `a default said twice: ${entry}`);
    });
  }

  test('eval\'s --seeds are sampling seeds and compare\'s training seeds; eval\'s MODEL may be a Hub id', () => {
    const evalHelp = entries(cli(['eval', '--help']).out);
    assert.match(evalHelp.find((e) => e.startsWith('--seeds')) ?? '', /sampling seeds, each a run of every task \(not training seeds/);
    assert.match(evalHelp.find((e) => e.startsWith('MODEL')) ?? '', /Hub model id/);
    assert.match(entries(cli(['compare', '--help']).out).find((e) => e.startsWith('--seeds')) ?? '', /^--seeds <value> +training seeds, each a run of every method/);
  });

  test('defaults are printed from the definitions, once', () => {
    const r = cli(['env', 'serve', '--help']);
    const port = entries(r.out).find((e) => e.startsWith('--port'));
    assert.match(port ?? '', /^--port <value> +port \[default: 8101\]$/);
  });

  test('NO_COLOR and TERM=dumb turn colour off on a terminal too; a pipe gets 80 columns whatever COLUMNS says', () => {
    const tty = { isTTY: true, columns: 120 };
    assert.deepEqual(usageStyle(tty, {}), { width: 100, color: true });
    assert.deepEqual(usageStyle(tty, { NO_COLOR: '1' }), { width: 100, color: false });
    assert.deepEqual(usageStyle(tty, { TERM: 'dumb' }), { width: 100, color: false });
    assert.deepEqual(usageStyle({ isTTY: false, columns: 200 }, {}), { width: 80, color: false });
    assert.deepEqual(usageStyle({ isTTY: true, columns: 60 }, {}), { width: 60, color: true });
  });

  test('a command group named alone shows its help and fails; no command at all too', () => {
    for (const words of [[], ['env']]) {
      const r = cli(words);
      assert.equal(r.code, 1);
      assert.match(r.out, /^Commands:$/m);
    }
  });
});

describe('commands', () => {
  test('a mistyped command is refused naming the one meant, before any help', () => {
    for (const [words, message] of [
      [['trian'], 'error: unknown command trian; did you mean train? (commands: bench, compare, env, eval, export, gpu, make-default-model, results, score, train, serve, web)'],
      [['trian', '--help'], 'error: unknown command trian; did you mean train?'],
      [['env', 'serv', 'household'], 'error: env: unknown command serv; did you mean serve? (commands: serve, expert)'],
      [['evl', 'runs/x'], 'error: unknown command evl; did you mean eval?'],
    ] as const) {
      const r = cli([...words]);
      assert.equal(r.code, 1, words.join(' '));
      assert.ok(r.err.startsWith(message), `${words.join(' ')}: ${r.err}`);
      assert.equal(r.out, '');
    }
  });

  test("package.json's bin is the package's name, so `npx <name> train` runs the CLI", () => {
    assert.deepEqual(PACKAGE.bin, { [PACKAGE.name]: 'src/cli/main.ts' });
    assert.match(readFileSync(path.join(ROOT, PACKAGE.bin![PACKAGE.name]), 'utf8'), /^#!\/usr\/bin\/env bun\n/);
    const r = spawnSync('npx', ['--yes', PACKAGE.name, 'train', '--help'], { cwd: ROOT, encoding: 'utf8' });
    assert.equal(r.status, 0, r.stderr);
    assert.match(r.stdout, new RegExp(`^Usage: ${PACKAGE.name} train \\[options\\] \\[CONFIG\\]$`, 'm'));
  });
});
