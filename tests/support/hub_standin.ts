// A local server that answers the routes @huggingface/hub and this trainer call as
// huggingface.co answers them (no network on the test machines): model info
// (/api/models/<id>/revision/<rev>), the file tree (/api/models/<id>/tree/<rev>), file
// downloads (/<id>/resolve/<rev>/<path>: regular files served with their git ETag,
// LFS files redirected to a CDN route with X-Linked-Etag and X-Linked-Size, Range
// honoured), and uploads (/api/repos/create, /api/models/<id>/preupload/<rev>, the LFS
// batch API /<id>.git/info/lfs/objects/batch with basic transfers, and the NDJSON
// commit /api/models/<id>/commit/<rev>). Errors carry the Hub's JSON body and
// X-Error-Code (RepoNotFound, RevisionNotFound, EntryNotFound); a repository that does
// not exist, or is private, reads as RepoNotFound with 401 to a request without a
// valid token and 404 to one with it, as on the Hub.

import { createHash, randomBytes } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

interface StoredFile {
  content: Uint8Array;
  lfs: boolean;
}

interface Repo {
  private: boolean;
  /** Commits, oldest first: each the whole tree at that commit. */
  commits: { oid: string; title: string; files: Map<string, StoredFile> }[];
}

export interface LoggedRequest {
  method: string;
  url: string;
  range: string | null;
  authorization: string | null;
  /** The status answered (0 until the answer is finished). */
  status: number;
  errorCode: string | null;
}

/** Files of a repository to publish: text, or bytes; LFS by default for .safetensors and binaries, as the Hub's .gitattributes has it. */
export type RepoFiles = Record<string, string | Uint8Array>;

const gitOid = (content: Uint8Array) => createHash('sha1').update(`blob ${content.length}\0`).update(content).digest('hex');
const sha256 = (content: Uint8Array) => createHash('sha256').update(content).digest('hex');
const isLfsPath = (path: string) => /\.(safetensors|bin|pt|pth|onnx|gguf|msgpack|h5)$/.test(path);

export class HubStandIn {
  readonly requests: LoggedRequest[] = [];
  private readonly repos = new Map<string, Repo>();
  /** Uploaded LFS objects by sha256. */
  private readonly lfsObjects = new Map<string, Uint8Array>();
  /** LFS oids whose next download is cut after half its bytes. */
  private readonly cutOnce = new Set<string>();
  private server: Server | null = null;
  url = '';

  constructor(readonly token = 'hf_standintoken') {}

  async start(): Promise<this> {
    this.server = createServer((req, res) => {
      const logged: LoggedRequest = { method: req.method ?? '', url: req.url ?? '', range: req.headers.range ?? null, authorization: req.headers.authorization ?? null, status: 0, errorCode: null };
      this.requests.push(logged);
      res.on('finish', () => {
        logged.status = res.statusCode;
        logged.errorCode = (res.getHeader('X-Error-Code') as string | undefined) ?? null;
      });
      this.route(req, res).catch((e) => {
        res.statusCode = 500;
        res.end(String(e));
      });
    });
    await new Promise<void>((resolve) => this.server!.listen(0, '127.0.0.1', resolve));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
    return this;
  }

  async close(): Promise<void> {
    this.server?.closeAllConnections();
    await new Promise((resolve) => this.server?.close(resolve));
  }

  /** Publishes `files` as a new commit of model `id` (created if new); the commit's oid. */
  publish(id: string, files: RepoFiles, opts: { private?: boolean } = {}): string {
    const repo = this.repos.get(id) ?? { private: opts.private ?? false, commits: [] };
    this.repos.set(id, repo);
    const tree = new Map(repo.commits.at(-1)?.files ?? []);
    for (const [path, content] of Object.entries(files)) {
      const bytes = typeof content === 'string' ? new TextEncoder().encode(content) : content;
      tree.set(path, { content: bytes, lfs: isLfsPath(path) });
      if (isLfsPath(path)) this.lfsObjects.set(sha256(bytes), bytes);
    }
    const oid = randomBytes(20).toString('hex');
    repo.commits.push({ oid, title: 'publish', files: tree });
    return oid;
  }

  /** The next download of `path` in model `id` is cut (the connection dropped) after half the file. */
  cutNextDownload(id: string, path: string): void {
    const file = this.repos.get(id)!.commits.at(-1)!.files.get(path)!;
    this.cutOnce.add(sha256(file.content));
  }

  /** The files of model `id` at its newest commit. */
  files(id: string): Map<string, Uint8Array> | null {
    const head = this.repos.get(id)?.commits.at(-1);
    return head ? new Map([...head.files].map(([p, f]) => [p, f.content])) : null;
  }

  private authorized(req: IncomingMessage): boolean | 'invalid' {
    const auth = req.headers.authorization;
    if (!auth) return false;
    return auth === `Bearer ${this.token}` ? true : 'invalid';
  }

  private static error(res: ServerResponse, status: number, message: string, code?: string): void {
    res.statusCode = status;
    res.setHeader('Content-Type', 'application/json; charset=utf-8');
    res.setHeader('X-Error-Message', message);
    if (code) res.setHeader('X-Error-Code', code);
    res.end(JSON.stringify({ error: message }));
  }

  /** The repository a request may read, or null after answering as the Hub does. */
  private readable(req: IncomingMessage, res: ServerResponse, id: string): Repo | null {
    const auth = this.authorized(req);
    if (auth === 'invalid') {
      HubStandIn.error(res, 401, 'Invalid credentials in Authorization header');
      return null;
    }
    const repo = this.repos.get(id);
    if (!repo || (repo.private && !auth)) {
      HubStandIn.error(res, auth ? 404 : 401, 'Repository not found', 'RepoNotFound');
      return null;
    }
    return repo;
  }

  private static commitAt(repo: Repo, rev: string) {
    return rev === 'main' || rev === 'HEAD' ? repo.commits.at(-1) : repo.commits.find((c) => c.oid === rev);
  }

  private async route(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', this.url);
    const p = decodeURIComponent(url.pathname);
    let m: RegExpExecArray | null;
    if (req.method === 'GET' && (m = /^\/api\/models\/([^/]+\/[^/]+)\/revision\/([^/]+)$/.exec(p))) return this.info(req, res, m[1], m[2]);
    if (req.method === 'GET' && (m = /^\/api\/models\/([^/]+\/[^/]+)\/tree\/([^/]+)(?:\/(.*))?$/.exec(p))) return this.tree(req, res, m[1], m[2], m[3] ?? '', url.searchParams.get('recursive') === 'true');
    if ((req.method === 'GET' || req.method === 'HEAD') && (m = /^\/([^/]+\/[^/]+)\/resolve\/([^/]+)\/(.+)$/.exec(p))) return this.resolve(req, res, m[1], m[2], m[3]);
    if ((req.method === 'GET' || req.method === 'HEAD') && (m = /^\/lfs-cdn\/([0-9a-f]{64})$/.exec(p))) return this.cdn(req, res, m[1]);
    if (req.method === 'POST' && p === '/api/repos/create') return this.create(req, res);
    if (req.method === 'POST' && (m = /^\/api\/models\/([^/]+\/[^/]+)\/preupload\/([^/]+)$/.exec(p))) return this.preupload(req, res, m[1]);
    if (req.method === 'POST' && (m = /^\/([^/]+\/[^/]+)\.git\/info\/lfs\/objects\/batch$/.exec(p))) return this.lfsBatch(req, res, m[1]);
    if (req.method === 'PUT' && (m = /^\/lfs-upload\/([0-9a-f]{64})$/.exec(p))) return this.lfsUpload(req, res, m[1]);
    if (req.method === 'POST' && (m = /^\/api\/models\/([^/]+\/[^/]+)\/commit\/([^/]+)$/.exec(p))) return this.commit(req, res, m[1]);
    HubStandIn.error(res, 404, 'Sorry, we can\'t find the page you are looking for.');
  }

  private info(req: IncomingMessage, res: ServerResponse, id: string, rev: string): void {
    const repo = this.readable(req, res, id);
    if (!repo) return;
    const commit = HubStandIn.commitAt(repo, rev);
    if (!commit) return HubStandIn.error(res, 404, `Invalid rev id: ${rev}`, 'RevisionNotFound');
    res.setHeader('Content-Type', 'application/json; charset=utf-8');
    res.end(JSON.stringify({
      _id: createHash('sha1').update(id).digest('hex').slice(0, 24),
      id,
      modelId: id,
      author: id.split('/')[0],
      sha: commit.oid,
      lastModified: new Date(0).toISOString(),
      private: repo.private,
      gated: false,
      disabled: false,
      downloads: 0,
      likes: 0,
      pipeline_tag: 'text-generation',
      library_name: 'transformers',
      tags: ['safetensors'],
      siblings: [...commit.files.keys()].map((rfilename) => ({ rfilename })),
    }));
  }

  private tree(req: IncomingMessage, res: ServerResponse, id: string, rev: string, under: string, recursive: boolean): void {
    const repo = this.readable(req, res, id);
    if (!repo) return;
    const commit = HubStandIn.commitAt(repo, rev);
    if (!commit) return HubStandIn.error(res, 404, `Invalid rev id: ${rev}`, 'RevisionNotFound');
    const prefix = under ? `${under.replace(/\/$/, '')}/` : '';
    const entries: unknown[] = [];
    const dirs = new Set<string>();
    for (const [path, file] of [...commit.files].sort(([a], [b]) => a.localeCompare(b))) {
      if (!path.startsWith(prefix)) continue;
      const rest = path.slice(prefix.length);
      if (!recursive && rest.includes('/')) {
        const dir = prefix + rest.slice(0, rest.indexOf('/'));
        if (!dirs.has(dir)) entries.push({ type: 'directory', oid: gitOid(new TextEncoder().encode(dir)), size: 0, path: dir });
        dirs.add(dir);
        continue;
      }
      const pointer = `version https://git-lfs.github.com/spec/v1\noid sha256:${sha256(file.content)}\nsize ${file.content.length}\n`;
      entries.push(file.lfs
        ? { type: 'file', oid: gitOid(new TextEncoder().encode(pointer)), size: file.content.length, path, lfs: { oid: sha256(file.content), size: file.content.length, pointerSize: pointer.length } }
        : { type: 'file', oid: gitOid(file.content), size: file.content.length, path });
    }
    if (prefix && entries.length === 0) return HubStandIn.error(res, 404, `Entry not found`, 'EntryNotFound');
    res.setHeader('Content-Type', 'application/json; charset=utf-8');
    res.end(JSON.stringify(entries));
  }

  private resolve(req: IncomingMessage, res: ServerResponse, id: string, rev: string, path: string): void {
    const repo = this.readable(req, res, id);
    if (!repo) return;
    const commit = HubStandIn.commitAt(repo, rev);
    if (!commit) return HubStandIn.error(res, 404, `Invalid rev id: ${rev}`, 'RevisionNotFound');
    const file = commit.files.get(path);
    if (!file) return HubStandIn.error(res, 404, 'Entry not found', 'EntryNotFound');
    res.setHeader('X-Repo-Commit', commit.oid);
    if (file.lfs) {
      const oid = sha256(file.content);
      res.statusCode = 302;
      res.setHeader('Location', `${this.url}/lfs-cdn/${oid}?X-Amz-Expires=3600`);
      res.setHeader('X-Linked-Etag', `"${oid}"`);
      res.setHeader('X-Linked-Size', String(file.content.length));
      res.setHeader('ETag', `"${gitOid(file.content)}"`);
      res.end(`Found. Redirecting to ${this.url}/lfs-cdn/${oid}`);
      return;
    }
    res.setHeader('ETag', `"${gitOid(file.content)}"`);
    this.send(req, res, file.content, false);
  }

  private cdn(req: IncomingMessage, res: ServerResponse, oid: string): void {
    const content = this.lfsObjects.get(oid);
    if (!content) return HubStandIn.error(res, 404, 'Not Found');
    res.setHeader('ETag', `"${oid}"`);
    const cut = req.method === 'GET' && this.cutOnce.delete(oid);
    this.send(req, res, content, cut);
  }

  /** Writes `content`, or the part a Range header asks for; `cut` drops the connection halfway. */
  private send(req: IncomingMessage, res: ServerResponse, content: Uint8Array, cut: boolean): void {
    res.setHeader('Accept-Ranges', 'bytes');
    res.setHeader('Content-Type', 'application/octet-stream');
    let start = 0;
    let end = content.length - 1;
    const range = /^bytes=(\d+)-(\d*)$/.exec(req.headers.range ?? '');
    if (range) {
      start = Number(range[1]);
      end = range[2] ? Math.min(Number(range[2]), end) : end;
      if (start > end) {
        res.statusCode = 416;
        res.setHeader('Content-Range', `bytes */${content.length}`);
        res.end();
        return;
      }
      res.statusCode = 206;
      res.setHeader('Content-Range', `bytes ${start}-${end}/${content.length}`);
    }
    const body = content.subarray(start, end + 1);
    res.setHeader('Content-Length', String(body.length));
    if (req.method === 'HEAD') return void res.end();
    if (!cut) return void res.end(body);
    res.flushHeaders();
    res.write(body.subarray(0, body.length >> 1), () => setTimeout(() => res.socket?.destroy(), 50));
  }

  private async json(req: IncomingMessage): Promise<string> {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    return Buffer.concat(chunks).toString('utf8');
  }

  /** The request's token is valid, else answered with 401. */
  private writer(req: IncomingMessage, res: ServerResponse): boolean {
    const auth = this.authorized(req);
    if (auth === true) return true;
    HubStandIn.error(res, 401, auth === 'invalid' ? 'Invalid credentials in Authorization header' : 'Invalid username or password.');
    return false;
  }

  private async create(req: IncomingMessage, res: ServerResponse): Promise<void> {
    if (!this.writer(req, res)) return;
    const body = JSON.parse(await this.json(req)) as { name: string; organization?: string; type?: string; private?: boolean; visibility?: string };
    const id = `${body.organization}/${body.name}`;
    if (this.repos.has(id)) {
      res.statusCode = 409;
      res.setHeader('Content-Type', 'application/json; charset=utf-8');
      res.end(JSON.stringify({ error: 'You already created this model repo', url: `${this.url}/${id}` }));
      return;
    }
    this.repos.set(id, { private: body.visibility === 'private' || body.private === true, commits: [{ oid: randomBytes(20).toString('hex'), title: 'initial commit', files: new Map() }] });
    res.setHeader('Content-Type', 'application/json; charset=utf-8');
    res.end(JSON.stringify({ url: `${this.url}/${id}`, name: id, id: createHash('sha1').update(id).digest('hex').slice(0, 24) }));
  }

  private async preupload(req: IncomingMessage, res: ServerResponse, id: string): Promise<void> {
    if (!this.writer(req, res) || !this.readable(req, res, id)) return;
    const body = JSON.parse(await this.json(req)) as { files: { path: string; size: number; sample: string }[] };
    const binary = (sample: string) => Buffer.from(sample, 'base64').includes(0);
    res.setHeader('Content-Type', 'application/json; charset=utf-8');
    res.end(JSON.stringify({
      files: body.files.map((f) => ({ path: f.path, uploadMode: isLfsPath(f.path) || f.size > 10_000_000 || binary(f.sample) ? 'lfs' : 'regular', shouldIgnore: false })),
      commitOid: this.repos.get(id)!.commits.at(-1)!.oid,
    }));
  }

  private async lfsBatch(req: IncomingMessage, res: ServerResponse, id: string): Promise<void> {
    if (!this.writer(req, res) || !this.readable(req, res, id)) return;
    const body = JSON.parse(await this.json(req)) as { operation: string; transfers?: string[]; objects: { oid: string; size: number }[] };
    res.setHeader('Content-Type', 'application/vnd.git-lfs+json');
    res.end(JSON.stringify({
      transfer: 'basic',
      objects: body.objects.map((o) => ({
        oid: o.oid,
        size: o.size,
        authenticated: true,
        ...(this.lfsObjects.has(o.oid) ? {} : { actions: { upload: { href: `${this.url}/lfs-upload/${o.oid}`, expires_in: 86400 } } }),
      })),
    }));
  }

  private async lfsUpload(req: IncomingMessage, res: ServerResponse, oid: string): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const content = new Uint8Array(Buffer.concat(chunks));
    if (sha256(content) !== oid) return HubStandIn.error(res, 400, `sha256 mismatch: expected ${oid}`);
    this.lfsObjects.set(oid, content);
    res.end();
  }

  private async commit(req: IncomingMessage, res: ServerResponse, id: string): Promise<void> {
    if (!this.writer(req, res)) return;
    const repo = this.readable(req, res, id);
    if (!repo) return;
    const tree = new Map(repo.commits.at(-1)?.files ?? []);
    let title = '';
    for (const line of (await this.json(req)).split('\n').filter(Boolean)) {
      const { key, value } = JSON.parse(line) as { key: string; value: Record<string, string | number> };
      if (key === 'header') title = String(value.summary);
      else if (key === 'file') tree.set(String(value.path), { content: new Uint8Array(Buffer.from(String(value.content), 'base64')), lfs: false });
      else if (key === 'lfsFile') {
        const content = this.lfsObjects.get(String(value.oid));
        if (!content) return HubStandIn.error(res, 400, `LFS pointer pointed to a file that does not exist: ${value.oid}`);
        tree.set(String(value.path), { content, lfs: true });
      } else if (key === 'deletedFile') tree.delete(String(value.path));
    }
    const oid = randomBytes(20).toString('hex');
    repo.commits.push({ oid, title, files: tree });
    res.setHeader('Content-Type', 'application/json; charset=utf-8');
    res.end(JSON.stringify({ success: true, commitOid: oid, commitUrl: `${this.url}/${id}/commit/${oid}`, hookOutput: '' }));
  }
}
