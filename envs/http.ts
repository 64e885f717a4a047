// Small node:http helpers shared by the environment servers: bounded JSON bodies and
// JSON answers with real status codes.

import type { IncomingMessage, ServerResponse } from '../src/net/http_server.ts';
import { readJsonObject as readJsonObjectOf } from '../src/net/request_body.ts';

/** An error that becomes an HTTP answer {"error": message} with this status. */
export class HttpError extends Error {
  override name = 'HttpError';
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

/** Parses a JSON object body; 400 (as HttpError) naming the problem otherwise. */
export function readJsonObject(req: IncomingMessage, maxBytes: number): Promise<Record<string, unknown>> {
  return readJsonObjectOf(req, maxBytes, (status, message) => new HttpError(status, message));
}

export function sendJson(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  if (res.headersSent || res.destroyed) return;
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json; charset=utf-8', 'content-length': Buffer.byteLength(text), ...headers });
  res.end(text);
}
