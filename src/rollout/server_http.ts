// node:http plumbing of the generation server: bounded JSON bodies, and answers in
// the OpenAI / vLLM error shape {"error": {"message", "type", "param", "code"}}.

import type { IncomingMessage, ServerResponse } from 'node:http';

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

/**
 * Reads the body, refusing more than maxBytes with 413. An oversize body is drained
 * (so the client can read the answer) up to a hard cap, past which the socket is dropped.
 */
export function readBody(req: IncomingMessage, maxBytes: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    let ended = false;
    const tooLarge = () => new ApiError(413, `request body larger than ${maxBytes} bytes`);
    req.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size <= maxBytes) chunks.push(chunk);
      else if (size > maxBytes * 4 + (1 << 20)) req.destroy();
    });
    req.on('end', () => {
      ended = true;
      if (size > maxBytes) reject(tooLarge());
      else resolve(Buffer.concat(chunks).toString('utf8'));
    });
    req.on('close', () => {
      if (!ended) reject(size > maxBytes ? tooLarge() : new ApiError(400, 'request body ended early'));
    });
    req.on('error', (e) => reject(new ApiError(400, `reading the request body failed: ${e.message}`)));
  });
}

/** The body as a JSON object; 400 naming the problem otherwise. */
export async function readJsonObject(req: IncomingMessage, maxBytes: number): Promise<Record<string, unknown>> {
  const text = await readBody(req, maxBytes);
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (e) {
    throw new ApiError(400, `malformed JSON body: ${(e as Error).message}`);
  }
  if (value === null || typeof value !== 'object' || Array.isArray(value)) throw new ApiError(400, 'the request body must be a JSON object');
  return value as Record<string, unknown>;
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
