#!/usr/bin/env bun
// Entry point: `bun src/cli/main.ts <command>` (package scripts: train, bench, env ...).

import { defineCommand, runMain } from 'citty';
import { benchCommand } from './bench.ts';
import { gpuInfoCommand } from './gpu_info.ts';

const main = defineCommand({
  meta: { name: 'wgt', description: 'WebGPU trainer for LLM agents' },
  subCommands: {
    bench: benchCommand,
    gpu: gpuInfoCommand,
  },
});

runMain(main);
