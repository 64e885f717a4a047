// Paths clients ask the server to read (adapters, checkpoints) must lie under the
// --allowed-root directory, checked on the path as written and again after symlinks
// are resolved, so neither "../" nor a link leads outside.

import * as path from '../storage/paths.ts';
import { storage } from '../storage/storage.ts';
import { ApiError } from './http.ts';

function inside(root: string, p: string): boolean {
  return p === root || p.startsWith(root.endsWith(path.sep) ? root : root + path.sep);
}

/** The real path of directory `p` (field `field` of a request), or a 403 / 400 saying why not. */
export function allowedDir(p: string, field: string, root: string | null): string {
  if (!root) throw new ApiError(403, `${field} refused: the server was started without --allowed-root, so it reads no paths from requests`, field);
  const resolved = path.resolve(p);
  if (!inside(root, resolved)) throw new ApiError(403, `${field} "${p}" is outside the allowed root ${root}`, field);
  let real: string;
  try {
    real = storage().realPath(resolved);
  } catch {
    throw new ApiError(400, `${field} "${p}": no such directory`, field);
  }
  if (!inside(root, real)) throw new ApiError(403, `${field} "${p}" resolves to ${real}, outside the allowed root ${root}`, field);
  if (!storage().stat(real)?.isDirectory) throw new ApiError(400, `${field} "${p}" is not a directory`, field);
  return real;
}
