// WGSL lives in the top-level shaders/ folder and is read at run time through storage/:
// from the files the program ships with (the repository's shaders/ under Bun, Deno and
// Node, from src/ or the compiled dist/src/ alike; in a browser tab, the same files'
// text bundled with the page).
//
// A shader file may include another with a line of its own
//   // #include "common/name.wgsl"
// (the path relative to shaders/), replaced by that file's text, itself expanded in
// turn. A file already included in a shader is left out when asked for again, so
// shared pieces include what they use and kernels include what they need without
// declaring anything twice. The line is a comment to WGSL, so a file reads as WGSL
// before expansion too.

import { GpuError } from '../device/errors.ts';
import { dirname, join, normalize, sep } from '../storage/paths.ts';
import { shippedFile, storage } from '../storage/storage.ts';

/** A shader's expanded source and where each of its lines came from. */
export interface ShaderText {
  code: string;
  /** `file:line` (relative to shaders/) of line `line` (1-based) of `code`. */
  origin(line: number): string;
}

const INCLUDE = /^\s*\/\/\s*#include\s+"([^"]*)"\s*$/;

let shaderDir: string | null = null;
const cache = new Map<string, ShaderText>();

function findShaderDir(): string {
  if (shaderDir) return shaderDir;
  const marker = shippedFile(join('shaders', 'elementwise.wgsl'));
  if (!marker) throw new GpuError('cannot find the shaders/ folder among the files this program ships with');
  return (shaderDir = dirname(marker));
}

/**
 * shaders/<family>.wgsl under `root` with its includes expanded. Throws naming the
 * file and line of an include that names a missing file or a path outside `root`.
 */
export function expandShader(root: string, family: string): ShaderText {
  const lines: string[] = [];
  const origins: string[] = [];
  const seen = new Set<string>();
  const visit = (file: string, from: string | null) => {
    seen.add(file);
    const path = join(root, file);
    if (!storage().exists(path)) {
      throw new GpuError(from ? `${from}: #include "${file}": no file ${path}` : `no shader file ${path} for kernel family "${family}"`);
    }
    storage().readText(path).split('\n').forEach((line, i) => {
      const at = `${file}:${i + 1}`;
      const m = INCLUDE.exec(line);
      if (!m) {
        lines.push(line);
        origins.push(at);
        return;
      }
      const target = normalize(m[1]);
      if (!target.endsWith('.wgsl') || target.startsWith('..') || target.startsWith(sep)) {
        throw new GpuError(`${at}: #include "${m[1]}" must name a .wgsl file inside shaders/`);
      }
      if (!seen.has(target)) visit(target, at);
    });
  };
  visit(`${family}.wgsl`, null);
  return { code: lines.join('\n'), origin: (line) => origins[line - 1] ?? `${family}.wgsl (expanded):${line}` };
}

/** shaders/<family>.wgsl with its includes expanded (read once per process). */
export function shaderText(family: string): ShaderText {
  let text = cache.get(family);
  if (!text) cache.set(family, (text = expandShader(findShaderDir(), family)));
  return text;
}

/** Source of shaders/<family>.wgsl, includes expanded. */
export function shaderSource(family: string): string {
  return shaderText(family).code;
}
