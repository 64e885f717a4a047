// Command lines checked against the commands' own definitions: every spelling citty
// accepts passes, anything else is named with the option meant.

import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { defineCommand } from 'citty';
import { envCommand } from '../src/cli/env.ts';
import { evalCommand } from '../src/cli/eval.ts';
import { assertKnownOptions } from '../src/cli/strict_args.ts';
import { trainCommand } from '../src/cli/train.ts';

const root = defineCommand({ meta: { name: 'wgt' }, subCommands: { train: trainCommand, eval: evalCommand, env: envCommand } });
const check = (line: string) => assertKnownOptions(root, line.split(' ').filter(Boolean));

describe('unknown options', () => {
  test('the spellings citty accepts pass: kebab and camel case, =value, --no-, values that look like flags, after --', () => {
    check('train examples/smoke.yaml optim.lr=1e-4 --resume --stop-after 2 --time-limit=30 --full-size');
    check('train --fullSize --stopAfter 2 --no-resume --backend opengl --tensor-cores off');
    check('eval runs/x --temperature -1 --seeds 2 --max-turns 3 --help');
    check('eval runs/x -h');
    check('env serve household --port 8101 --host 127.0.0.1');
    check('train -- --anything goes');
  });

  test('a misspelling is named, with the option meant when one is close', () => {
    assert.throws(() => check('train --iteratons 3'), { name: 'CliError', message: 'train: unknown option --iteratons; did you mean --iterations? (`train --help` lists the options)' });
    assert.throws(() => check('train --resum'), /unknown option --resum; did you mean --resume\?/);
    assert.throws(() => check('eval runs/x --seed=3'), /eval: unknown option --seed; did you mean --seeds\?/);
    assert.throws(() => check('env serve household --prot 1'), /env serve: unknown option --prot; did you mean --port\?/);
    assert.throws(() => check('train --no-method'), /unknown option --no-method/, '--no- only negates a boolean');
    assert.throws(() => check('train -x'), /unknown option -x \(/);
    assert.throws(() => check('train --completely-different'), (e: Error) => /unknown option --completely-different \(/.test(e.message) && !e.message.includes('did you mean'));
  });

  test('a string option takes the next word as its value, so a value is never read as an option', () => {
    check('train --method --resum');
    assert.throws(() => check('train --resume --resum'), /unknown option --resum/, 'a boolean takes no value');
  });

  test('an unknown command is named, with the command meant when one is close', () => {
    assert.throws(() => check('traim --iterations 3'), { name: 'CliError', message: 'unknown command traim; did you mean train? (commands: train, eval, env)' });
    assert.throws(() => check('env serv household --prot 1'), { name: 'CliError', message: 'env: unknown command serv; did you mean serve? (commands: serve, expert)' });
    assert.throws(() => check('frobnicate'), (e: Error) => e.message === 'unknown command frobnicate (commands: train, eval, env)');
    check('env');
  });
});
