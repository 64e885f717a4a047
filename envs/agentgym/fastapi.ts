// How AgentGym's servers answer as HTTP peers, whatever environment they run: FastAPI
// routes whose request bodies and query parameters are pydantic models (v2, lax mode).
// A body or parameter that does not validate gets 422 with pydantic's error list
// under "detail"; a path with no route 404 {"detail": "Not Found"}, a route asked with
// another method 405 {"detail": "Method Not Allowed"}; an exception a route does not
// catch becomes 500 with the plain text "Internal Server Error". Anything a route
// returns is its JSON answer with status 200, errors it catches itself included
// (agentenv-alfworld's {"error": ...}).

import { createServer, type IncomingMessage, type ServerResponse } from '../../src/net/http_server.ts';
import { listen } from '../../src/net/listen.ts';
import { readBody } from '../../src/net/request_body.ts';

/** A pydantic field: `int`, `str`, or `Optional[int] = None`. */
export type FieldType = 'int' | 'str' | 'int?';

export interface Route {
  method: 'GET' | 'POST';
  path: string;
  /** The body's model (POST); GET routes read `query`. */
  body?: Record<string, FieldType>;
  query?: Record<string, FieldType>;
  /** The route's function, with the validated fields; throwing is an uncaught exception (500). */
  handle(fields: Record<string, unknown>): unknown;
}

export interface FastApiHandle {
  readonly url: string;
  readonly port: number;
  close(): Promise<void>;
}

interface PydanticError {
  type: string;
  loc: (string | number)[];
  msg: string;
  input: unknown;
  ctx?: Record<string, unknown>;
}

class Invalid extends Error {
  constructor(readonly errors: PydanticError[]) {
    super('validation failed');
  }
}

const INTEGER = /^\s*[+-]?\d+\s*$/;

/** One field as pydantic v2 validates it in lax mode. */
function validateField(type: FieldType, value: unknown, loc: (string | number)[], fromQuery: boolean): { ok: true; value: unknown } | { ok: false; error: PydanticError } {
  if (value === undefined) {
    if (type === 'int?') return { ok: true, value: null };
    return { ok: false, error: { type: 'missing', loc, msg: 'Field required', input: null } };
  }
  if (type === 'int?' && value === null) return { ok: true, value: null };
  if (type === 'str') {
    return typeof value === 'string' ? { ok: true, value } : { ok: false, error: { type: 'string_type', loc, msg: 'Input should be a valid string', input: value } };
  }
  if (typeof value === 'number') {
    if (Number.isInteger(value)) return { ok: true, value };
    return { ok: false, error: { type: 'int_from_float', loc, msg: 'Input should be a valid integer, got a number with a fractional part', input: value } };
  }
  if (typeof value === 'boolean' && !fromQuery) return { ok: true, value: value ? 1 : 0 };
  if (typeof value === 'string') {
    if (INTEGER.test(value)) return { ok: true, value: Number(value) };
    return { ok: false, error: { type: 'int_parsing', loc, msg: 'Input should be a valid integer, unable to parse string as an integer', input: value } };
  }
  return { ok: false, error: { type: 'int_type', loc, msg: 'Input should be a valid integer', input: value } };
}

function validateModel(model: Record<string, FieldType>, data: Record<string, unknown>, where: 'body' | 'query'): Record<string, unknown> {
  const fields: Record<string, unknown> = {};
  const errors: PydanticError[] = [];
  for (const [name, type] of Object.entries(model)) {
    const r = validateField(type, data[name], [where, name], where === 'query');
    if (r.ok) fields[name] = r.value;
    else errors.push(where === 'body' ? { ...r.error, input: r.error.type === 'missing' ? data : r.error.input } : r.error);
  }
  if (errors.length) throw new Invalid(errors);
  return fields;
}

/** The request body as a pydantic model sees it. */
function parseBody(text: string, model: Record<string, FieldType>): Record<string, unknown> {
  if (text.trim() === '') throw new Invalid([{ type: 'missing', loc: ['body'], msg: 'Field required', input: null }]);
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (e) {
    throw new Invalid([{ type: 'json_invalid', loc: ['body', 0], msg: 'JSON decode error', input: {}, ctx: { error: (e as Error).message } }]);
  }
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    throw new Invalid([{ type: 'model_attributes_type', loc: ['body'], msg: 'Input should be a valid dictionary or object to extract fields from', input: value }]);
  }
  return validateModel(model, value as Record<string, unknown>, 'body');
}

function send(res: ServerResponse, status: number, body: unknown): void {
  if (res.headersSent || res.destroyed) return;
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

function internalError(res: ServerResponse): void {
  if (res.headersSent || res.destroyed) return;
  res.writeHead(500, { 'content-type': 'text/plain; charset=utf-8', 'content-length': 21 });
  res.end('Internal Server Error');
}

const MAX_BODY_BYTES = 1 << 20;

/** Serves `routes` as a FastAPI application would. */
export async function serveFastApi(routes: readonly Route[], options: { host?: string; port?: number } = {}): Promise<FastApiHandle> {
  const handle = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const url = new URL(req.url ?? '/', 'http://localhost');
    const onPath = routes.filter((r) => r.path === url.pathname);
    const route = onPath.find((r) => r.method === req.method);
    if (!route) {
      req.resume();
      return send(res, onPath.length ? 405 : 404, { detail: onPath.length ? 'Method Not Allowed' : 'Not Found' });
    }
    let fields: Record<string, unknown>;
    try {
      const text = await readBody(req, MAX_BODY_BYTES, (_, message) => new Error(message));
      const query = Object.fromEntries(url.searchParams);
      fields = { ...(route.query ? validateModel(route.query, query, 'query') : {}), ...(route.body ? parseBody(text, route.body) : {}) };
    } catch (e) {
      if (e instanceof Invalid) return send(res, 422, { detail: e.errors });
      return internalError(res);
    }
    let answer: unknown;
    try {
      answer = await route.handle(fields);
    } catch {
      return internalError(res);
    }
    send(res, 200, answer);
  };
  const server = createServer((req, res) => void handle(req, res));
  const { port, origin } = await listen(server, options.port ?? 0, options.host ?? '127.0.0.1');
  return {
    url: origin,
    port,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        // Not every runtime's node:http has it (Deno's may not); keep-alive sockets then close on their own.
        (server as { closeAllConnections?: () => void }).closeAllConnections?.();
      }),
  };
}

/** Python's list indexing: -1 is the last item; anything outside [-n, n) raises IndexError ("list index out of range"). */
export function pythonIndex(index: number, length: number): number | null {
  const i = index < 0 ? index + length : index;
  return i >= 0 && i < length ? i : null;
}
