// `export --push`: a directory uploaded to a model repository of the Hub through
// @huggingface/hub (the repository created when missing, every file in one commit;
// the library sends large and binary files through LFS as the Hub asks), with the
// token huggingface_hub would use.

import { storage } from '../storage/storage.ts';
import * as path from '../storage/paths.ts';
import { createRepo, HubApiError, uploadFiles } from '@huggingface/hub';
import { hubEndpoint, hubOffline, hubToken, tokenPath } from './hub_env.ts';
import { HubError, hubFailure, type HubContext } from './hub_errors.ts';
import { isHubId } from './hub_model.ts';
import { formatBytes } from './transfer_progress.ts';

/** Where a push goes, checked before anything is written: the repository id, and a token to write with. */
export function pushTarget(repo: string, option = '--push'): HubContext {
  if (!isHubId(repo)) throw new HubError(`${option} ${repo}: expected a Hub repository id, owner/name`);
  if (hubOffline()) throw new HubError(`${option} ${repo}: HF_HUB_OFFLINE is set, so nothing can be uploaded`);
  const token = hubToken();
  if (!token) throw new HubError(`${option} ${repo}: no Hugging Face token; set HF_TOKEN to a token that may write, or log in with \`hf auth login\` (which writes ${tokenPath()})`);
  return { repo, endpoint: hubEndpoint(), token };
}

/**
 * fetch, with a Blob subclass body (the library's lazy file blobs) sent as its bytes:
 * Bun's fetch sends such a body as the empty Blob it extends, so an LFS upload would
 * carry nothing. One file, or one part of a multipart upload, is read at a time.
 */
const fetchBlobBodies = (async (input: RequestInfo | URL, init?: RequestInit) => {
  const body = init?.body;
  if (body instanceof Blob && body.constructor !== Blob) return fetch(input, { ...init, body: new Uint8Array(await body.arrayBuffer()) });
  return fetch(input, init);
}) as typeof fetch;

function filesUnder(dir: string, under = ''): string[] {
  return storage().list(path.join(dir, under)).flatMap((name) => {
    const rel = under ? `${under}/${name}` : name;
    return storage().stat(path.join(dir, rel))?.isDirectory ? filesUnder(dir, rel) : [rel];
  });
}

export interface PushOptions {
  /** Files under `dir` (relative paths) that stay local. */
  leaveOut?: readonly string[];
  log?: (line: string) => void;
}

/** Uploads every file under `dir` but those left out to `target` as one commit; the commit's URL. */
export async function pushDirectory(dir: string, target: HubContext, opts: PushOptions = {}): Promise<string> {
  const log = opts.log ?? ((l: string) => process.stderr.write(`${l}\n`));
  const repo = { type: 'model' as const, name: target.repo };
  const where = `${target.endpoint}/${target.repo}`;
  try {
    await createRepo({ repo, accessToken: target.token!, hubUrl: target.endpoint });
    log(`created ${where}`);
  } catch (e) {
    // 409: the repository exists, and the commit goes on top of it.
    if (!(e instanceof HubApiError && e.statusCode === 409)) throw hubFailure(e, `${target.repo}: creating the repository`, target, 'upload');
  }
  const files = filesUnder(dir).filter((f) => !opts.leaveOut?.includes(f)).sort();
  const bytes = files.reduce((n, f) => n + storage().stat(path.join(dir, f))!.size, 0);
  log(`uploading ${files.length} files (${formatBytes(bytes)}) from ${dir} to ${where}`);
  try {
    const out = await uploadFiles({
      repo,
      accessToken: target.token,
      hubUrl: target.endpoint,
      files: files.map((f) => ({ path: f, content: path.toFileUrl(path.resolve(dir, f)) })),
      commitTitle: `Upload ${path.basename(path.resolve(dir))} from webgpu-agent-trainer`,
      fetch: fetchBlobBodies,
    });
    if (!out) throw new HubError(`${target.repo}: the Hub made no commit`);
    return out.commit.url;
  } catch (e) {
    throw hubFailure(e, `${target.repo}: uploading`, target, 'upload');
  }
}
