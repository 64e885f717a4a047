// The platform under Bun, Deno and Node: the local file system, node:path and this
// process. The browser build puts browser_platform.ts in this module's place
// (src/cli/web_build.ts), so nothing else names a platform.

import * as nodePath from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { nodeProcess } from './node_process.ts';
import { NodeStorage } from './node_storage.ts';
import type { Platform } from './types.ts';

/** The folders above this module: the repository from src/, and dist/ before it from the compiled copy (which holds the skill cards, not the shaders). */
function ancestors(): string[] {
  const out: string[] = [];
  for (let dir = nodePath.dirname(fileURLToPath(import.meta.url)); out.length < 6 && !out.includes(dir); dir = nodePath.dirname(dir)) out.push(dir);
  return out;
}

export const platform: Platform = {
  storage: new NodeStorage(),
  paths: { ...nodePath, toFileUrl: pathToFileURL },
  process: nodeProcess,
  shippedRoots: ancestors(),
};
