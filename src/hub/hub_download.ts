// One file of a Hub repository into the cache's blob store, as huggingface_hub writes
// it: bytes go to blobs/<etag>.incomplete and are renamed to blobs/<etag> once their
// size matches the tree's. A partial file, left by a connection cut or a process
// stopped midway, is continued with a Range request rather than fetched again; a cut
// connection is retried a few times, each attempt resuming where the last stopped.
// The bytes are fetched here rather than through @huggingface/hub's WebBlob, which
// hides the status that says whether a server honoured the Range (206) or is sending
// the whole file again (200), and so cannot resume safely.

import * as path from '../storage/paths.ts';
import { hostProcess, storage } from '../storage/storage.ts';
import { HubError, isNetworkError, networkCause, repoNotFound, type HubContext } from './hub_errors.ts';
import { formatBytes, type TransferProgress } from './transfer_progress.ts';

export interface BlobDownload {
  /** The file's resolve URL (/<repo>/resolve/<commit>/<path>). */
  url: string;
  /** Where the finished file goes: blobs/<etag>. */
  blob: string;
  /** The lock that keeps two processes from writing the same .incomplete file. */
  lock: string;
  /** Its size in the repository's tree. */
  size: number;
  /** The file's path in the repository, for messages. */
  label: string;
}

const ATTEMPTS = 5;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Runs `fn` holding `lock` (a file naming this process); waits while a live process holds it, takes it over from a dead one. */
async function withLock<T>(lock: string, what: string, progress: TransferProgress, fn: () => Promise<T>): Promise<T> {
  storage().makeDir(path.dirname(lock));
  let told = false;
  for (;;) {
    if (storage().createExclusive(lock, String(hostProcess().pid))) break;
    let holder = NaN;
    try {
      holder = Number(storage().readText(lock));
    } catch {
      continue;
    }
    // An empty file is one being written by its taker this instant.
    if (holder > 0 && !hostProcess().alive(holder)) {
      storage().remove(lock);
      continue;
    }
    if (!told) progress.line(`  ${what}: waiting for process ${holder || '?'}, which is downloading it`);
    told = true;
    await sleep(500);
  }
  try {
    return await fn();
  } finally {
    storage().remove(lock);
  }
}

/** The failure a resolve answer that is not the file stands for. */
async function answerError(res: Response, d: BlobDownload, ctx: HubContext): Promise<HubError> {
  const code = res.headers.get('X-Error-Code');
  if (code === 'RepoNotFound') return repoNotFound(ctx);
  let said = res.headers.get('X-Error-Message') ?? '';
  try {
    const body = (await res.json()) as { error?: string };
    said = body.error ?? said;
  } catch {
    // Not JSON: the status says it.
  }
  if (code === 'EntryNotFound') return new HubError(`${ctx.repo}: the Hub lists ${d.label} but has no such file to download (${said})`);
  return new HubError(`${ctx.repo}: downloading ${d.label}: the Hub answered ${res.status}${said ? `: ${said}` : ''}`);
}

/** One attempt: the bytes after the `have` on disk, appended (false: the partial file was dropped, try again); throws a network error when the connection is cut. */
async function fetchRest(d: BlobDownload, part: string, have: number, ctx: HubContext, progress: TransferProgress): Promise<boolean> {
  const res = await fetch(d.url, {
    headers: {
      // Bytes as stored, as huggingface_hub asks: offsets into a compressed body would not be offsets into the file.
      'Accept-Encoding': 'identity',
      ...(ctx.token ? { Authorization: `Bearer ${ctx.token}` } : {}),
      ...(have > 0 ? { Range: `bytes=${have}-` } : {}),
    },
  });
  if (res.status === 416) {
    // The server's file is not longer than the partial one: that was not a prefix of it.
    await res.body?.cancel();
    storage().remove(part);
    return false;
  }
  if (!res.ok) throw await answerError(res, d, ctx);
  let offset = have;
  if (have > 0 && res.status !== 206) offset = 0;
  else if (have > 0 && !(res.headers.get('Content-Range') ?? '').startsWith(`bytes ${have}-`)) {
    await res.body?.cancel();
    throw new HubError(`${ctx.repo}: ${d.label}: asked for bytes ${have}- and got ${res.headers.get('Content-Range')}`);
  }
  // What is kept is a prefix of the file, so the rest is appended to it.
  if (offset === 0) storage().remove(part);
  const out = storage().openAppend(part);
  const file = progress.file(d.label, d.size, offset);
  if (have > 0) progress.line(offset > 0 ? `  ${d.label}: resuming at ${formatBytes(have)} of ${formatBytes(d.size)}` : `  ${d.label}: the server sent the whole file again; starting over`);
  try {
    for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
      out.append(chunk);
      offset += chunk.length;
      file.advance(chunk.length);
    }
  } finally {
    out.close();
  }
  if (offset < d.size) throw new Error(`connection closed at ${formatBytes(offset)} of ${formatBytes(d.size)}`);
  file.done();
  return true;
}

/** Downloads `d` into its blob unless it is already there, with resumes and a size check. */
export async function downloadBlob(d: BlobDownload, ctx: HubContext, progress: TransferProgress): Promise<void> {
  const part = `${d.blob}.incomplete`;
  await withLock(d.lock, d.label, progress, async () => {
    // Another process may have finished it while this one waited.
    if (storage().exists(d.blob) && storage().stat(d.blob)!.size === d.size) return;
    storage().makeDir(path.dirname(d.blob));
    for (let attempt = 1; ; attempt++) {
      let have = storage().exists(part) ? storage().stat(part)!.size : 0;
      if (have > d.size) {
        storage().remove(part);
        have = 0;
      }
      if (have === d.size) break;
      try {
        if (await fetchRest(d, part, have, ctx, progress)) break;
        if (attempt === ATTEMPTS) throw new HubError(`${ctx.repo}: ${d.label} cannot be downloaded: the Hub refuses every range of it`);
      } catch (e) {
        if (!isNetworkError(e)) throw e;
        const at = storage().exists(part) ? storage().stat(part)!.size : 0;
        if (attempt === ATTEMPTS) {
          throw new HubError(`${ctx.repo}: downloading ${d.label} failed ${ATTEMPTS} times (${networkCause(e)}); ${formatBytes(at)} of ${formatBytes(d.size)} are kept in ${part}, and the same command resumes from there`);
        }
        progress.line(`  ${d.label}: connection lost at ${formatBytes(at)} of ${formatBytes(d.size)} (${networkCause(e)})`);
        await sleep(250 * attempt);
      }
    }
    const size = storage().stat(part)!.size;
    if (size !== d.size) {
      storage().remove(part);
      throw new HubError(`${ctx.repo}: ${d.label} downloaded as ${size} bytes where the Hub lists ${d.size}; removed, so run the command again`);
    }
    storage().rename(part, d.blob);
  });
}
