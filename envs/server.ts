// Serves one Environment over HTTP with our protocol (docs/PROTOCOLS.md
// section 4): POST /envs, POST /envs/{id}/step, DELETE /envs/{id}, GET /health.
// Errors are real HTTP statuses with {"error": message}; bad input never takes the
// server down. Built on node:http so it runs unchanged on Bun, Deno and Node.

import { listen } from '../src/net/listen.ts';
import { createServer, type IncomingMessage, type ServerResponse } from '../src/net/http_server.ts';
import { SPLITS, type EnvSession, type Environment, type Split } from '../src/envs/types.ts';
import { EnvInputError, EpisodeDoneError } from './errors.ts';
import { HttpError, readJsonObject, sendJson } from './http.ts';

export interface ServeOptions {
  host?: string;
  /** 0 picks a free port. */
  port?: number;
  /** Sessions untouched this long are closed and forgotten. */
  idleTimeoutMs?: number;
  maxBodyBytes?: number;
  /** Live sessions at most; creating one more answers 503. */
  maxSessions?: number;
}

export interface EnvServerHandle {
  /** "http://127.0.0.1:8101" */
  readonly url: string;
  readonly port: number;
  sessionCount(): number;
  close(): Promise<void>;
}

interface LiveSession {
  session: EnvSession;
  done: boolean;
  lastUsed: number;
  /** Steps of one session run one after another, in arrival order. */
  queue: Promise<unknown>;
  busy: number;
}

export const SERVER_DEFAULTS = {
  host: '127.0.0.1',
  port: 0,
  idleTimeoutMs: 10 * 60_000,
  maxBodyBytes: 64 * 1024,
  maxSessions: 1024,
} as const;

function parseCreate(body: Record<string, unknown>): { split: Split; seed: number; task: unknown } {
  const { split, seed, task } = body;
  if (typeof split !== 'string') throw new HttpError(400, `field "split" must be one of ${SPLITS.join(', ')}`);
  if (!(SPLITS as readonly string[]).includes(split)) {
    throw new HttpError(400, `field "split": unknown split "${split}" (expected one of ${SPLITS.join(', ')})`);
  }
  if (typeof seed !== 'number' || !Number.isSafeInteger(seed) || seed < 0) {
    throw new HttpError(400, 'field "seed" must be a non-negative integer');
  }
  return { split: split as Split, seed, task: task ?? null };
}

/** Errors from the environment itself: its input errors are the client's fault, the rest are ours. */
function envError(e: unknown): HttpError {
  if (e instanceof HttpError) return e;
  if (e instanceof EnvInputError) return new HttpError(400, e.message);
  if (e instanceof EpisodeDoneError) return new HttpError(409, e.message);
  return new HttpError(500, `environment error: ${(e as Error)?.message ?? String(e)}`);
}

export async function serveEnvironment(env: Environment, options: ServeOptions = {}): Promise<EnvServerHandle> {
  const opts = { ...SERVER_DEFAULTS, ...options };
  const sessions = new Map<string, LiveSession>();

  const closeSession = async (id: string): Promise<void> => {
    const live = sessions.get(id);
    if (!live) return;
    sessions.delete(id);
    try {
      await live.session.close();
    } catch {
      // The session is gone from the table either way; a failing close must not surface to other clients.
    }
  };

  const reclaimIdle = (): void => {
    const now = Date.now();
    for (const [id, live] of sessions) {
      if (live.busy === 0 && now - live.lastUsed > opts.idleTimeoutMs) void closeSession(id);
    }
  };

  const create = async (req: IncomingMessage): Promise<unknown> => {
    const { split, seed, task } = parseCreate(await readJsonObject(req, opts.maxBodyBytes));
    if (sessions.size >= opts.maxSessions) reclaimIdle();
    if (sessions.size >= opts.maxSessions) {
      throw new HttpError(503, `too many sessions (at most ${opts.maxSessions}); DELETE finished ones`);
    }
    let session: EnvSession;
    let first;
    try {
      session = await env.create({ split, seed, task });
      first = await session.reset();
    } catch (e) {
      throw envError(e);
    }
    const id = crypto.randomUUID();
    sessions.set(id, { session, done: false, lastUsed: Date.now(), queue: Promise.resolve(), busy: 0 });
    return { id, task: session.task, ...first };
  };

  const step = async (id: string, req: IncomingMessage): Promise<unknown> => {
    const body = await readJsonObject(req, opts.maxBodyBytes);
    const live = sessions.get(id);
    if (!live) throw new HttpError(404, `unknown session "${id}"`);
    if (typeof body.action !== 'string') throw new HttpError(400, 'field "action" must be a string');
    const action = body.action;
    live.busy++;
    const run = live.queue.then(async () => {
      if (live.done) throw new HttpError(409, `session "${id}": the episode is over; DELETE it and create a new one`);
      try {
        const result = await live.session.step(action);
        live.done = result.done;
        return result;
      } catch (e) {
        throw envError(e);
      }
    });
    live.queue = run.catch(() => undefined);
    try {
      return await run;
    } finally {
      live.busy--;
      live.lastUsed = Date.now();
    }
  };

  const remove = async (id: string): Promise<unknown> => {
    if (!sessions.has(id)) throw new HttpError(404, `unknown session "${id}"`);
    await closeSession(id);
    return { closed: true };
  };

  const route = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const path = new URL(req.url ?? '/', 'http://localhost').pathname;
    const method = req.method ?? 'GET';
    const allow = (methods: string): never => {
      res.setHeader('allow', methods);
      throw new HttpError(405, `${method} ${path} is not allowed (allowed: ${methods})`);
    };
    if (path === '/health') {
      if (method !== 'GET') allow('GET');
      return sendJson(res, 200, { ok: true, env: env.name, version: env.version, max_steps: env.maxSteps, sessions: sessions.size });
    }
    if (path === '/envs') {
      if (method !== 'POST') allow('POST');
      return sendJson(res, 200, await create(req));
    }
    let m = path.match(/^\/envs\/([^/]+)\/step$/);
    if (m) {
      if (method !== 'POST') allow('POST');
      return sendJson(res, 200, await step(decodeURIComponent(m[1]), req));
    }
    m = path.match(/^\/envs\/([^/]+)$/);
    if (m) {
      if (method !== 'DELETE') allow('DELETE');
      return sendJson(res, 200, await remove(decodeURIComponent(m[1])));
    }
    throw new HttpError(404, `no route ${method} ${path}`);
  };

  const server = createServer((req, res) => {
    route(req, res).catch((e: unknown) => {
      const err = e instanceof HttpError ? e : new HttpError(500, `internal error: ${(e as Error)?.message ?? String(e)}`);
      // Whatever is left of a refused body is not worth reading on a kept-alive connection.
      const headers: Record<string, string> = err.status === 413 ? { connection: 'close' } : {};
      sendJson(res, err.status, { error: err.message }, headers);
    });
  });
  server.on('clientError', (_err, socket) => {
    if (socket.writable) socket.end('HTTP/1.1 400 Bad Request\r\nconnection: close\r\ncontent-length: 0\r\n\r\n');
    else socket.destroy();
  });

  const { port, origin } = await listen(server, opts.port, opts.host);

  const sweeper = setInterval(reclaimIdle, Math.max(10, Math.min(60_000, opts.idleTimeoutMs / 4)));
  sweeper.unref?.();

  return {
    url: origin,
    port,
    sessionCount: () => sessions.size,
    close: async () => {
      clearInterval(sweeper);
      await Promise.all([...sessions.keys()].map(closeSession));
      await new Promise<void>((resolve) => {
        server.close(() => resolve());
        (server as { closeAllConnections?: () => void }).closeAllConnections?.();
      });
    },
  };
}
