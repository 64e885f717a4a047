// POSIX paths for a platform without node:path (a browser tab): '/' separates, the
// working directory is the root, so "runs/x" and "/runs/x" name the same file.

import type { PathFunctions } from './types.ts';

/** The parts of an absolute path, with "." and ".." resolved ("..": never above the root). */
function parts(path: string): string[] {
  const out: string[] = [];
  for (const part of path.split('/')) {
    if (part === '' || part === '.') continue;
    if (part === '..') out.pop();
    else out.push(part);
  }
  return out;
}

function resolve(...paths: string[]): string {
  let joined = '';
  for (const p of paths) joined = p.startsWith('/') ? p : `${joined}/${p}`;
  return `/${parts(joined).join('/')}`;
}

function normalize(path: string): string {
  if (path === '') return '.';
  const absolute = path.startsWith('/');
  const out: string[] = [];
  for (const part of path.split('/')) {
    if (part === '' || part === '.') continue;
    if (part === '..' && out.length && out[out.length - 1] !== '..') out.pop();
    else if (part !== '..' || !absolute) out.push(part);
  }
  const body = out.join('/');
  const trailing = path.endsWith('/') && body ? '/' : '';
  return absolute ? `/${body}${trailing}` : (body || '.') + trailing;
}

function dirname(path: string): string {
  const trimmed = path.length > 1 ? path.replace(/\/+$/, '') : path;
  const at = trimmed.lastIndexOf('/');
  if (at < 0) return '.';
  return at === 0 ? '/' : trimmed.slice(0, at);
}

function basename(path: string, suffix?: string): string {
  const name = path.replace(/\/+$/, '').split('/').pop() ?? '';
  return suffix && name.endsWith(suffix) && name !== suffix ? name.slice(0, -suffix.length) : name;
}

function extname(path: string): string {
  const name = basename(path);
  const dot = name.lastIndexOf('.');
  return dot > 0 && name !== '..' ? name.slice(dot) : '';
}

function relative(from: string, to: string): string {
  const a = parts(resolve(from));
  const b = parts(resolve(to));
  let same = 0;
  while (same < a.length && same < b.length && a[same] === b[same]) same++;
  return [...a.slice(same).map(() => '..'), ...b.slice(same)].join('/');
}

export const posixPaths: PathFunctions = {
  sep: '/',
  join: (...paths) => normalize(paths.filter((p) => p !== '').join('/')),
  resolve,
  relative,
  dirname,
  basename,
  extname,
  normalize,
  isAbsolute: (path) => path.startsWith('/'),
  toFileUrl: (path) => new URL(`file://${resolve(path).split('/').map(encodeURIComponent).join('/')}`),
};
