// The program's command tree: every command under the name package.json's bin installs.
// main.ts runs it; tests read it to parse documented command lines with the program's
// own parser.

import { defineCommand } from 'citty';
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
import { webCommand } from './web.ts';

/** The command package.json's bin installs, which usage lines name. */
export const PROGRAM = 'webgpu-agent-trainer';

export const mainCommand = defineCommand({
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
    web: webCommand,
  },
});
