// A retrieval server that answers as the references' FastAPI servers do (docs/PROTOCOLS.md
// section 3), on node:http, over any Retriever (BM25 over a corpus by default):
// - protocol search-r1 (Search-R1's search_r1/search/retrieval_server.py):
//     POST /retrieve {"queries": [...], "topk": k, "return_scores": bool}
// - protocol sdar (SDAR's examples/search/retriever/retrieval_server.py):
//     POST /retrieve {"query": "...", "topk": k, "return_scores": bool}
// both answered {"result": [[{"document": {"id", "contents"}, "score"}, ...] per query]}
// (bare documents without return_scores). A topk of 0 or null takes the server's
// default (Python's `if not request.topk`). Bad bodies get FastAPI's 422
// {"detail": [...]} (pydantic_body.ts); other routes and methods 404 and 405
// {"detail": ...}; a retriever that throws, 500 "Internal Server Error" with the error
// on the server's stderr, as uvicorn does. Beyond the references, the server caps
// queries per request, topk and the body size (413 and 422 naming the limit).
// Run directly: `bun envs/retriever_server.ts [--corpus corpus.jsonl] [--port 8000]
// [--protocol search-r1|sdar] [--topk 3] [--max-queries 16384]` (without --corpus it
// serves the built-in search world's corpus).

import { createServer, type IncomingMessage, type ServerResponse } from '../src/net/http_server.ts';
import { parseArgs } from 'node:util';
import { listen } from '../src/net/listen.ts';
import { readBody } from '../src/net/request_body.ts';
import { parseModelBody, ValidationFailure, type FieldSpec } from './pydantic_body.ts';
import { builtInSearchData } from './search/env.ts';
import { RETRIEVER_PROTOCOLS, type RetrieverProtocol } from './search/http_retriever.ts';
import { loadCorpus } from './search/jsonl.ts';
import { Bm25Retriever, type Retriever } from './search/retriever.ts';

export interface RetrieverServerOptions {
  /** Default 127.0.0.1: the corpus is not meant for the network at large. */
  host?: string;
  /** Default 0: an ephemeral port (read it from the result). */
  port?: number;
  /** Which reference server's request it takes (default search-r1). */
  protocol?: RetrieverProtocol;
  /** Largest request body accepted, in bytes (default 16 MiB). */
  maxBodyBytes?: number;
  /** Most queries in one request (default 16,384; Search-R1's GRPO recipe sends 512 x 5 = 2,560). */
  maxQueries?: number;
  /** Largest topk accepted (default 100). */
  maxTopk?: number;
  /** topk when the request gives none, or 0 (default 3, the references' --topk). */
  defaultTopk?: number;
}

export interface RetrieverServer {
  /** The /retrieve endpoint, e.g. http://127.0.0.1:41234/retrieve. */
  url: string;
  port: number;
  close(): Promise<void>;
}

class Refusal extends Error {
  constructor(readonly status: number, readonly detail: unknown, readonly headers: Record<string, string> = {}) {
    super(typeof detail === 'string' ? detail : JSON.stringify(detail));
  }
}

const COMMON: FieldSpec[] = [
  { name: 'topk', kind: 'optional[int]', default: null },
  { name: 'return_scores', kind: 'bool', default: false },
];

const REQUEST_MODELS: Record<RetrieverProtocol, FieldSpec[]> = {
  'search-r1': [{ name: 'queries', kind: 'list[str]' }, ...COMMON],
  sdar: [{ name: 'query', kind: 'str' }, ...COMMON],
};

/** FastAPI reads a body as JSON for application/json and application/*+json. */
function isJson(req: IncomingMessage): boolean {
  const type = (req.headers['content-type'] ?? '').split(';')[0].trim().toLowerCase();
  return type === 'application/json' || (type.startsWith('application/') && type.endsWith('+json'));
}

function send(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  if (res.headersSent || res.destroyed) return;
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text), ...headers });
  res.end(text);
}

export async function startRetrieverServer(retriever: Retriever, options: RetrieverServerOptions = {}): Promise<RetrieverServer> {
  const protocol = options.protocol ?? 'search-r1';
  const maxBodyBytes = options.maxBodyBytes ?? 16 << 20;
  const maxQueries = options.maxQueries ?? 16_384;
  const maxTopk = options.maxTopk ?? 100;
  const defaultTopk = options.defaultTopk ?? 3;

  const retrieve = async (req: IncomingMessage) => {
    const text = await readBody(req, maxBodyBytes, (status, message) => new Refusal(status, message));
    const body = parseModelBody(text, isJson(req), REQUEST_MODELS[protocol]);
    const queries = protocol === 'sdar' ? [body.query as string] : (body.queries as string[]);
    const asked = body.topk as number | null;
    if (asked !== null && (asked < 0 || asked > maxTopk)) {
      const [type, msg, ctx] = asked < 0 ? ['greater_than_equal', 'Input should be greater than or equal to 0', { ge: 0 }] : ['less_than_equal', `Input should be less than or equal to ${maxTopk}`, { le: maxTopk }];
      throw new ValidationFailure([{ type: type as string, loc: ['body', 'topk'], msg: msg as string, input: asked, ctx: ctx as Record<string, unknown> }]);
    }
    if (queries.length > maxQueries) throw new Refusal(413, `${queries.length} queries in one request; this server takes at most ${maxQueries} (--max-queries)`);
    const topk = asked === null || asked === 0 ? defaultTopk : asked;
    const lists = await retriever.retrieve(queries, topk);
    const result = lists.map((hits) =>
      hits.map((h) => {
        const document = { id: h.document.id, contents: h.document.contents };
        return body.return_scores ? { document, score: h.score } : document;
      }),
    );
    return { result };
  };

  const handle = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const path = new URL(req.url ?? '/', 'http://localhost').pathname;
    if (path === '/health' && req.method === 'GET') return send(res, 200, { ok: true });
    if (path !== '/retrieve') throw new Refusal(404, 'Not Found');
    if (req.method !== 'POST') throw new Refusal(405, 'Method Not Allowed', { allow: 'POST' });
    send(res, 200, await retrieve(req));
  };

  const server = createServer((req, res) => {
    handle(req, res).catch((e: unknown) => {
      if (e instanceof ValidationFailure) return send(res, 422, { detail: e.detail });
      if (e instanceof Refusal) return send(res, e.status, { detail: e.detail }, e.status === 413 ? { ...e.headers, connection: 'close' } : e.headers);
      console.error(`retriever server: ${req.method} ${req.url}: ${e instanceof Error ? (e.stack ?? e.message) : String(e)}`);
      if (res.headersSent || res.destroyed) return;
      res.writeHead(500, { 'content-type': 'text/plain; charset=utf-8', 'content-length': 21 });
      res.end('Internal Server Error');
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

function intFlag(flag: string, value: string, min: number): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < min) throw new Error(`${flag} ${value}: expected an integer >= ${min}`);
  return n;
}

/** The command line: `--corpus <jsonl>` (default: the built-in world), `--host`, `--port`, `--protocol`, `--topk`, `--max-queries`. */
export async function runRetrieverServer(argv: string[]): Promise<RetrieverServer> {
  const { values } = parseArgs({
    args: argv,
    options: {
      corpus: { type: 'string' },
      host: { type: 'string', default: '127.0.0.1' },
      port: { type: 'string', default: '8000' },
      protocol: { type: 'string', default: 'search-r1' },
      topk: { type: 'string', default: '3' },
      'max-queries': { type: 'string', default: '16384' },
    },
  });
  const protocol = values.protocol as RetrieverProtocol;
  if (!RETRIEVER_PROTOCOLS.includes(protocol)) throw new Error(`--protocol ${values.protocol}: expected ${RETRIEVER_PROTOCOLS.join(' or ')}`);
  const retriever = values.corpus !== undefined ? new Bm25Retriever(loadCorpus(values.corpus)) : builtInSearchData().retriever;
  const server = await startRetrieverServer(retriever, {
    host: values.host, port: intFlag('--port', values.port, 0), protocol,
    defaultTopk: intFlag('--topk', values.topk, 1), maxQueries: intFlag('--max-queries', values['max-queries'], 1),
  });
  console.log(`retriever (${protocol} protocol) listening on ${server.url}`);
  return server;
}

if ((import.meta as ImportMeta & { main?: boolean }).main === true) await runRetrieverServer(process.argv.slice(2));
