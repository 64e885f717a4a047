// A Search-R1 compatible retrieval server (docs/PROTOCOLS.md section 3) on node:http:
//   POST /retrieve {"queries": [...], "topk": 3, "return_scores": true}
//     -> {"result": [[{"document": {"id", "contents"}, "score"}, ...], ...]}
// plus the single-query form {"query": "..."} and bare documents when return_scores is
// false. Bad requests get a 4xx with a message; nothing a client sends can stop it.
// Run directly: `bun envs/retriever_server.ts [--corpus corpus.jsonl] [--port 8000]`
// (without --corpus it serves the built-in search world's corpus).

import { listen } from '../src/net/listen.ts';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { parseArgs } from 'node:util';
import { builtInSearchData } from './search/env.ts';
import { loadCorpus } from './search/jsonl.ts';
import { Bm25Retriever, type Retriever } from './search/retriever.ts';

export interface RetrieverServerOptions {
  /** Default 127.0.0.1: the corpus is not meant for the network at large. */
  host?: string;
  /** Default 0: an ephemeral port (read it from the result). */
  port?: number;
  /** Largest request body accepted, in bytes (default 1 MiB). */
  maxBodyBytes?: number;
  /** Most queries in one request (default 1024). */
  maxQueries?: number;
  /** Largest topk accepted (default 100). */
  maxTopk?: number;
  /** topk when the request gives none (default 3). */
  defaultTopk?: number;
}

export interface RetrieverServer {
  /** The /retrieve endpoint, e.g. http://127.0.0.1:41234/retrieve. */
  url: string;
  port: number;
  close(): Promise<void>;
}

class HttpError extends Error {
  constructor(readonly status: number, message: string) {
    super(message);
  }
}

function readBody(req: IncomingMessage, limit: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const declared = Number(req.headers['content-length'] ?? 0);
    if (declared > limit) {
      req.resume();
      reject(new HttpError(413, `request body over ${limit} bytes`));
      return;
    }
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size > limit) {
        req.removeAllListeners('data');
        req.resume();
        reject(new HttpError(413, `request body over ${limit} bytes`));
        return;
      }
      chunks.push(chunk);
    });
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
  });
}

interface RetrieveRequest {
  queries: string[];
  topk: number;
  returnScores: boolean;
}

function parseRequest(text: string, opts: Required<Omit<RetrieverServerOptions, 'host' | 'port'>>): RetrieveRequest {
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    throw new HttpError(400, 'body is not valid JSON');
  }
  if (body === null || typeof body !== 'object' || Array.isArray(body)) throw new HttpError(400, 'body must be a JSON object');
  const b = body as Record<string, unknown>;
  if (b.queries !== undefined && b.query !== undefined) throw new HttpError(400, 'give either "query" or "queries", not both');
  let queries: string[];
  if (b.queries !== undefined) {
    if (!Array.isArray(b.queries) || !b.queries.every((q) => typeof q === 'string')) throw new HttpError(400, '"queries" must be a list of strings');
    queries = b.queries;
  } else if (typeof b.query === 'string') {
    queries = [b.query];
  } else {
    throw new HttpError(400, 'missing "queries" (list of strings) or "query" (string)');
  }
  if (queries.length > opts.maxQueries) throw new HttpError(400, `at most ${opts.maxQueries} queries per request`);
  const topk = b.topk ?? opts.defaultTopk;
  if (typeof topk !== 'number' || !Number.isInteger(topk) || topk < 1 || topk > opts.maxTopk) {
    throw new HttpError(400, `"topk" must be an integer from 1 to ${opts.maxTopk}`);
  }
  const returnScores = b.return_scores ?? false;
  if (typeof returnScores !== 'boolean') throw new HttpError(400, '"return_scores" must be a boolean');
  return { queries, topk, returnScores };
}

function send(res: ServerResponse, status: number, body: unknown): void {
  if (res.headersSent) return;
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

export async function startRetrieverServer(retriever: Retriever, options: RetrieverServerOptions = {}): Promise<RetrieverServer> {
  const opts = {
    maxBodyBytes: options.maxBodyBytes ?? 1 << 20,
    maxQueries: options.maxQueries ?? 1024,
    maxTopk: options.maxTopk ?? 100,
    defaultTopk: options.defaultTopk ?? 3,
  };
  const handle = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const path = new URL(req.url ?? '/', 'http://localhost').pathname;
    if (path === '/health' && req.method === 'GET') return send(res, 200, { ok: true });
    if (path !== '/retrieve') throw new HttpError(404, `no route ${path}`);
    if (req.method !== 'POST') throw new HttpError(405, 'use POST /retrieve');
    const request = parseRequest(await readBody(req, opts.maxBodyBytes), opts);
    const lists = await retriever.retrieve(request.queries, request.topk);
    const result = lists.map((hits) =>
      hits.map((h) => {
        const document = { id: h.document.id, contents: h.document.contents };
        return request.returnScores ? { document, score: h.score } : document;
      }),
    );
    send(res, 200, { result });
  };
  const server = createServer((req, res) => {
    handle(req, res).catch((e: unknown) => {
      const status = e instanceof HttpError ? e.status : 500;
      const message = e instanceof Error ? e.message : String(e);
      if (status === 413) res.setHeader('connection', 'close');
      send(res, status, { error: message });
    });
  });
  server.on('clientError', (_err, socket) => {
    if (socket.writable) socket.end('HTTP/1.1 400 Bad Request\r\nconnection: close\r\n\r\n');
    else socket.destroy();
  });
  const { port, origin } = await listen(server, options.port ?? 0, options.host ?? '127.0.0.1');
  return {
    url: `${origin}/retrieve`,
    port,
    close: () => new Promise<void>((done, fail) => {
      server.close((err) => (err ? fail(err) : done()));
      server.closeAllConnections();
    }),
  };
}

/** The command line: `--corpus <jsonl>` (default: the built-in world), `--host`, `--port`, `--topk`. */
export async function runRetrieverServer(argv: string[]): Promise<RetrieverServer> {
  const { values } = parseArgs({
    args: argv,
    options: {
      corpus: { type: 'string' },
      host: { type: 'string', default: '127.0.0.1' },
      port: { type: 'string', default: '8000' },
      topk: { type: 'string', default: '3' },
    },
  });
  const retriever = values.corpus !== undefined ? new Bm25Retriever(loadCorpus(values.corpus)) : builtInSearchData().retriever;
  const server = await startRetrieverServer(retriever, { host: values.host, port: Number(values.port), defaultTopk: Number(values.topk) });
  console.log(`retriever listening on ${server.url}`);
  return server;
}

if ((import.meta as ImportMeta & { main?: boolean }).main === true) await runRetrieverServer(process.argv.slice(2));
