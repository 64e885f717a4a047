// This process under Bun, Deno or Node: its pid, host name and command line, Ctrl-C,
// its end, and its standard output.

import * as os from 'node:os';
import type { HostProcess } from './types.ts';

export const nodeProcess: HostProcess = {
  pid: process.pid,
  hostname: os.hostname(),
  command: process.argv.slice(1).join(' '),
  startedAt: Date.now() - process.uptime() * 1000,
  env: process.env,
  tempDir: os.tmpdir(),
  homeDir: os.homedir(),
  stdout: process.stdout,
  alive(pid) {
    try {
      process.kill(pid, 0);
      return true;
    } catch (e) {
      // A process owned by another user exists all the same.
      return (e as { code?: string }).code === 'EPERM';
    }
  },
  onInterrupt(listener) {
    process.on('SIGINT', listener);
    return () => void process.off('SIGINT', listener);
  },
  onExit(listener) {
    process.on('exit', listener);
    return () => void process.off('exit', listener);
  },
  exit: (code) => process.exit(code),
};
