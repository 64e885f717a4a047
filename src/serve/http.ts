// node:http plumbing of the generation server: bounded JSON bodies, and answers in
// the OpenAI / vLLM error shape {"error": {"message", "type", "param", "code"}}.

import type { IncomingMessage, ServerResponse } from '../net/http_server.ts';
import { readJsonObject as readJsonObjectOf } from '../net/request_body.ts';

const ERROR_TYPES: Record<number, string> = {
  400: 'BadRequestError',
  401: 'AuthenticationError',
  403: 'PermissionDeniedError',
  404: 'NotFoundError',
  405: 'MethodNotAllowedError',
  413: 'RequestTooLargeError',
  500: 'InternalServerError',
  503: 'ServiceUnavailableError',
};

/** An error answered with this status and message. */
export class ApiError extends Error {
  override name = 'ApiError';
  constructor(
    readonly status: number,
    message: string,
    /** The request field at fault, when there is one. */
    readonly param: string | null = null,
  ) {
    super(message);
  }

  get body(): { error: { message: string; type: string; param: string | null; code: number } } {
    return { error: { message: this.message, type: ERROR_TYPES[this.status] ?? 'Error', param: this.param, code: this.status } };
  }
}

/** The body as a JSON object; 400 (as ApiError) naming the problem otherwise. */
export function readJsonObject(req: IncomingMessage, maxBytes: number): Promise<Record<string, unknown>> {
  return readJsonObjectOf(req, maxBytes, (status, message) => new ApiError(status, message), maxBytes * 4 + (1 << 20));
}

export function sendJson(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  if (res.headersSent || res.destroyed) return;
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json; charset=utf-8', 'content-length': Buffer.byteLength(text), ...headers });
  res.end(text);
}

/** Plain-text answers, as vLLM gives for adapter loading. */
export function sendText(res: ServerResponse, status: number, text: string): void {
  if (res.headersSent || res.destroyed) return;
  res.writeHead(status, { 'content-type': 'text/plain; charset=utf-8', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}
