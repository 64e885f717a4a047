// Paths as the platform spells them (node:path under Bun, Deno and Node; POSIX paths
// from the page's root in a browser), with node:path's names, so that code reads the
// same on every platform.

import { platform } from './platform.ts';

const p = platform.paths;

export const sep = p.sep;
export const join = (...parts: string[]): string => p.join(...parts);
export const resolve = (...parts: string[]): string => p.resolve(...parts);
export const relative = (from: string, to: string): string => p.relative(from, to);
export const dirname = (path: string): string => p.dirname(path);
export const basename = (path: string, suffix?: string): string => p.basename(path, suffix);
export const extname = (path: string): string => p.extname(path);
export const normalize = (path: string): string => p.normalize(path);
export const isAbsolute = (path: string): boolean => p.isAbsolute(path);
export const toFileUrl = (path: string): URL => p.toFileUrl(path);
