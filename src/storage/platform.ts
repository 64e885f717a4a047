// The platform under Bun, Deno and Node: the local file system, node:path and this
// process. The browser build puts browser_platform.ts in this module's place
// (src/web/build.ts), so nothing else names a platform.

import * as nodePath from 'node:path';
import { nodeProcess } from './node_process.ts';
import { NodeStorage } from './node_storage.ts';
import type { Platform } from './types.ts';

export const platform: Platform = { storage: new NodeStorage(), paths: nodePath, process: nodeProcess };
