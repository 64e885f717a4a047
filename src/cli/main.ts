#!/usr/bin/env bun
// Entry point: `bun src/cli/main.ts <command>` (package scripts: train, bench, env ...),
// and package.json's bin, so that `npx webgpu-agent-trainer <command>` runs it too.

import { runCommand } from 'citty';
import { mainCommand as main, PROGRAM } from './commands.ts';
import { assertKnownOptions, resolveCommand } from './strict_args.ts';
import { renderUsage, usageStyle } from './usage.ts';

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
