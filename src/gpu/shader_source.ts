// WGSL lives in the top-level shaders/ folder and is read at run time. The folder is
// found by walking up from this module, so the same code works from src/ (Bun, Deno)
// and from the compiled dist/src/ (Node).

import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { GpuError } from './errors.ts';

let shaderDir: string | null = null;
const cache = new Map<string, string>();

function findShaderDir(): string {
  if (shaderDir) return shaderDir;
  let dir = dirname(fileURLToPath(import.meta.url));
  for (let i = 0; i < 6; i++) {
    const candidate = join(dir, 'shaders');
    if (existsSync(join(candidate, 'elementwise.wgsl'))) return (shaderDir = candidate);
    dir = dirname(dir);
  }
  throw new GpuError(`cannot find the shaders/ folder above ${fileURLToPath(import.meta.url)}`);
}

/** Source of shaders/<family>.wgsl. */
export function shaderSource(family: string): string {
  let src = cache.get(family);
  if (src === undefined) {
    const path = join(findShaderDir(), `${family}.wgsl`);
    if (!existsSync(path)) throw new GpuError(`no shader file ${path} for kernel family "${family}"`);
    src = readFileSync(path, 'utf8');
    cache.set(family, src);
  }
  return src;
}
