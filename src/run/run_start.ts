// How a run starts in its directory: new, continued from a checkpoint (--resume), or
// started over. A run that stopped before its first checkpoint (Ctrl-C, a failure, a
// full disk) has nothing to continue and nothing worth keeping, so the command that
// started it starts it over, with or without --resume; only a run with a checkpoint
// is refused without --resume or --overwrite.

import { storage } from '../storage/storage.ts';
import * as path from '../storage/paths.ts';
import { checkpointName, findLatestCheckpoint, listCheckpoints } from '../checkpoint/checkpoint.ts';
import { METRICS_FILE, RUN_CONFIG_FILE } from '../report/run_files.ts';

export type RunStart =
  | { kind: 'new' }
  /** The directory holds a run that is replaced; `note` says why, when not asked for with --overwrite. */
  | { kind: 'restart'; note: string | null }
  | { kind: 'resume'; checkpoint: string };

/** Whether `dir` holds files of a run (a started one, checkpointed or not). */
function holdsRun(dir: string): boolean {
  return storage().exists(path.join(dir, METRICS_FILE)) || storage().exists(path.join(dir, RUN_CONFIG_FILE));
}

/** How a run in `dir` starts; throws, naming the flags that work, where the directory's run must not be lost or there is nothing to resume. */
export function planRunStart(dir: string, opts: { resume?: boolean; resumeFrom?: string; overwrite?: boolean }): RunStart {
  const root = path.join(dir, 'checkpoints');
  const checkpoint = findLatestCheckpoint(root);
  if (opts.resumeFrom) {
    const named = path.join(root, opts.resumeFrom);
    if (listCheckpoints(root).map(checkpointName).includes(opts.resumeFrom)) return { kind: 'resume', checkpoint: named };
    const have = listCheckpoints(root).map(checkpointName);
    throw new Error(`--resume ${opts.resumeFrom}: no complete checkpoint ${named}${have.length ? `; ${root} holds ${have.join(', ')}` : ''}`);
  }
  if (opts.resume) {
    if (checkpoint) return { kind: 'resume', checkpoint };
    if (!holdsRun(dir)) throw new Error(`--resume: there is no run in ${dir} to continue; run the command without --resume to start it`);
    return { kind: 'restart', note: `--resume: ${dir} stopped before its first checkpoint (none under ${root}); starting it from the beginning` };
  }
  if (!holdsRun(dir) && !checkpoint) return { kind: 'new' };
  if (opts.overwrite) return { kind: 'restart', note: null };
  if (!checkpoint) return { kind: 'restart', note: `${dir} holds a run that stopped before its first checkpoint; starting it over` };
  throw new Error(`${dir} already holds a run (checkpoints up to ${path.basename(checkpoint)}): pass --resume to continue it, --overwrite to replace it, or set output.runName to another name`);
}
