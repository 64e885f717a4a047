// A model named by its Hub id (owner/name, where no such local path exists) becomes a
// directory of the Hugging Face cache, laid out as huggingface_hub lays it out so that
// transformers, vLLM and this trainer share one copy: models--owner--name/blobs/<etag>,
// snapshots/<commit>/<file> linking to the blobs, refs/main naming the commit. Only
// what the trainer reads is fetched (configs, tokenizer files, chat templates,
// safetensors). HF_HUB_OFFLINE uses the cache alone; a Hub that cannot be reached falls
// back to a cached snapshot, saying so, as huggingface_hub does.

import * as path from '../storage/paths.ts';
// `storage` here names a model's folder in the cache, as huggingface_hub calls it.
import { storage as disk } from '../storage/storage.ts';
import { getRepoFolderName, listFiles, modelInfo, type ListFileEntry } from '@huggingface/hub';
import { downloadBlob } from './hub_download.ts';
import { hubCacheDir, hubEndpoint, hubOffline, hubToken } from './hub_env.ts';
import { HubError, hubFailure, isNetworkError, networkCause, type HubContext } from './hub_errors.ts';
import { formatBytes, TransferProgress, type TransferSink } from './transfer_progress.ts';

/** owner/name as the Hub spells repository ids (no "--" or "..", which the cache's folder names and paths reserve). */
export function isHubId(s: string): boolean {
  return /^[A-Za-z0-9][\w.-]*\/[A-Za-z0-9][\w.-]*$/.test(s) && !s.includes('--') && !s.includes('..') && !s.endsWith('.git');
}

/** Whether the trainer reads `file` of a model repository (not README, .gitattributes, other weight formats). */
export function wantedFile(file: string): boolean {
  return /^[^/]+\.(json|safetensors|txt|jinja)$/.test(file) || /^additional_chat_templates\/[^/]+\.jinja$/.test(file);
}

export interface HubModelOptions {
  /** Where messages go (default: standard error, so that standard output stays the command's). */
  log?: (line: string) => void;
  /** Where download progress goes (default: standard error). */
  progress?: TransferSink;
}

const REVISION = 'main';

/** The snapshot refs/main names, when the cache holds one with a config.json (refs/main is written once every file is in). */
function cachedSnapshot(storage: string): string | null {
  const ref = path.join(storage, 'refs', REVISION);
  if (!disk().exists(ref)) return null;
  const dir = path.join(storage, 'snapshots', disk().readText(ref).trim());
  return disk().exists(path.join(dir, 'config.json')) ? dir : null;
}

/** Links `pointer` to `blob` by a relative path, as huggingface_hub does (the cache may move); a copy where links are refused. */
function link(blob: string, pointer: string): void {
  disk().makeDir(path.dirname(pointer));
  disk().remove(pointer);
  disk().link(path.relative(path.dirname(pointer), blob), pointer);
}

const sizeOf = (e: ListFileEntry) => e.lfs?.size ?? e.size;

async function downloadSnapshot(ctx: HubContext, commit: string, storage: string, log: (l: string) => void, out: TransferSink): Promise<string> {
  const files: ListFileEntry[] = [];
  try {
    for await (const e of listFiles({ repo: { type: 'model', name: ctx.repo }, revision: commit, recursive: true, hubUrl: ctx.endpoint, accessToken: ctx.token })) {
      if (e.type === 'file' && wantedFile(e.path)) files.push(e);
    }
  } catch (e) {
    throw hubFailure(e, `${ctx.repo}: listing its files`, ctx);
  }
  const page = `${ctx.endpoint}/${ctx.repo}`;
  if (!files.some((f) => f.path === 'config.json')) throw new HubError(`${ctx.repo}: the repository has no config.json (${page}), so it is not a transformers model`);
  if (!files.some((f) => f.path.endsWith('.safetensors'))) throw new HubError(`${ctx.repo}: the repository has no safetensors weights (${page}); this trainer reads only those`);
  const snapshot = path.join(storage, 'snapshots', commit);
  const present = (f: ListFileEntry) => {
    const pointer = path.join(snapshot, f.path);
    return disk().exists(pointer) && disk().stat(pointer)!.size === sizeOf(f);
  };
  const missing = files.filter((f) => !present(f));
  if (missing.length) {
    const bytes = missing.reduce((n, f) => n + sizeOf(f), 0);
    log(`${ctx.repo}: downloading ${missing.length} of ${files.length} files (${formatBytes(bytes)}) at commit ${commit.slice(0, 7)} from ${ctx.endpoint} into ${storage}`);
  }
  const progress = new TransferProgress(out);
  const locks = path.join(path.dirname(storage), '.locks', path.basename(storage));
  for (const f of missing) {
    const etag = f.lfs?.oid ?? f.oid;
    if (!etag) throw new HubError(`${ctx.repo}: the Hub lists ${f.path} without an object id`);
    const blob = path.join(storage, 'blobs', etag);
    const url = `${ctx.endpoint}/${ctx.repo}/resolve/${commit}/${f.path.split('/').map(encodeURIComponent).join('/')}`;
    await downloadBlob({ url, blob, lock: path.join(locks, `${etag}.lock`), size: sizeOf(f), label: f.path }, ctx, progress);
    link(blob, path.join(snapshot, f.path));
  }
  // Written last: a snapshot refs/main names is complete, which offline use relies on.
  disk().makeDir(path.join(storage, 'refs'));
  disk().writeAtomic(path.join(storage, 'refs', REVISION), commit);
  log(`${ctx.repo}: ${snapshot}${missing.length ? '' : ' (in the cache)'}`);
  return snapshot;
}

/**
 * `input` itself when it names a local path or is no Hub id; for a Hub id, its
 * snapshot directory in the cache, downloaded as needed.
 */
export async function hubModelDir(input: string, opts: HubModelOptions = {}): Promise<string> {
  // A path whose first folder exists here is a local path mistyped: the caller says so.
  if (disk().exists(input) || !isHubId(input) || disk().exists(input.split('/')[0])) return input;
  const log = opts.log ?? ((l: string) => process.stderr.write(`${l}\n`));
  const ctx: HubContext = { repo: input, endpoint: hubEndpoint(), token: hubToken() };
  const storage = path.join(hubCacheDir(), getRepoFolderName({ type: 'model', name: input }));
  const cached = cachedSnapshot(storage);
  if (hubOffline()) {
    if (!cached) throw new HubError(`${input}: HF_HUB_OFFLINE is set and the model is not in the Hugging Face cache (${storage}); download it once with HF_HUB_OFFLINE unset, or name a local directory`);
    log(`${input}: ${cached} (HF_HUB_OFFLINE: the cache only)`);
    return cached;
  }
  let commit: string;
  try {
    commit = (await modelInfo({ name: input, revision: REVISION, additionalFields: ['sha'], hubUrl: ctx.endpoint, accessToken: ctx.token })).sha;
  } catch (e) {
    if (isNetworkError(e) && cached) {
      log(`${input}: cannot reach the Hub at ${ctx.endpoint} (${networkCause(e)}); using the cached snapshot ${cached}`);
      return cached;
    }
    throw hubFailure(e, input, ctx);
  }
  return downloadSnapshot(ctx, commit, storage, log, opts.progress ?? process.stderr);
}
