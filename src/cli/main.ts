#!/usr/bin/env bun
// Entry point: `bun src/cli/main.ts <command>` (package scripts: train, bench, env ...),
// and package.json's bin, so that `npx webgpu-agent-trainer <command>` runs it too.

import { defineCommand, runCommand } from 'citty';
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
import { assertKnownOptions, resolveCommand } from './strict_args.ts';
import { renderUsage, usageStyle } from './usage.ts';

/** The command package.json's bin installs, which usage lines name. */
const PROGRAM = 'webgpu-agent-trainer';

const main = defineCommand({
  meta: { name: PROGRAM, description: `WebGPU trainer for LLM agents. From a checkout of it: \`npx ${PROGRAM} <command>\`, or \`npx bun run cli <command>\`.` },
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
const beforeDashes = rawArgs.includes('--') ? rawArgs.slice(0, rawArgs.indexOf('--')) : rawArgs;
try {
  const target = resolveCommand(main, rawArgs);
  if (target.incomplete || beforeDashes.includes('--help') || beforeDashes.includes('-h')) {
    process.stdout.write(renderUsage(target.cmd, [PROGRAM, ...target.name.split(' ').filter(Boolean)], usageStyle()));
    // A group named without its command ran nothing.
    process.exit(target.incomplete && !beforeDashes.includes('--help') && !beforeDashes.includes('-h') ? 1 : 0);
  }
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
