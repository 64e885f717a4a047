// Whole-file writes that never leave a half-written file behind: the text goes to a
// temporary file beside the target, then a rename replaces the target in one step.

import * as fs from 'node:fs';
import * as path from 'node:path';

/** Writes `text` to `file` (creating its folder) through a temporary file and a rename. */
export function writeFileAtomic(file: string, text: string): void {
  fs.mkdirSync(path.dirname(path.resolve(file)), { recursive: true });
  const temp = `${file}.tmp-${process.pid}`;
  fs.writeFileSync(temp, text);
  fs.renameSync(temp, file);
}
