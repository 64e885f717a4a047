#!/usr/bin/env bun
// Entry point: `bun src/cli/main.ts <command>` (package scripts: train, bench, env ...).

import { defineCommand, runCommand, runMain } from 'citty';
import { benchCommand } from './bench.ts';
import { compareCommand } from './compare.ts';
import { envCommand } from './env.ts';
import { evalCommand } from './eval.ts';
import { exportCommand } from './export.ts';
import { gpuInfoCommand } from './gpu_info.ts';
import { makeDefaultModelCommand } from './make_default_model.ts';
import { resultsCommand } from './results.ts';
import { scoreCommand } from './score.ts';
import { trainCommand } from './train.ts';
import { serveCommand } from './serve.ts';
import { assertKnownOptions } from './strict_args.ts';

const main = defineCommand({
  meta: { name: 'wgt', description: 'WebGPU trainer for LLM agents' },
  subCommands: {
    bench: benchCommand,
    compare: compareCommand,
    env: envCommand,
    eval: evalCommand,
    export: exportCommand,
    gpu: gpuInfoCommand,
    'make-default-model': makeDefaultModelCommand,
    results: resultsCommand,
    score: scoreCommand,
    train: trainCommand,
    serve: serveCommand,
  },
});

const rawArgs = process.argv.slice(2);
if (rawArgs.length === 0 || rawArgs.includes('--help') || rawArgs.includes('-h')) {
  await runMain(main);
} else {
  try {
    assertKnownOptions(main, rawArgs);
    await runCommand(main, { rawArgs });
  } catch (e) {
    // Bad input is reported as one line saying what and where; a stack trace only helps for bugs.
    const err = e as Error;
    const bug = err instanceof TypeError || err instanceof ReferenceError || err instanceof RangeError || err instanceof SyntaxError;
    const expected = err instanceof Error && !bug && !process.env.DEBUG;
    console.error(expected ? `error: ${err.message}` : err);
    process.exit(1);
  }
}
