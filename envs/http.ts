// Small node:http helpers shared by the environment servers: bounded JSON bodies and
// JSON answers with real status codes.

import type { IncomingMessage, ServerResponse } from 'node:http';

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

/**
 * Reads the whole body, refusing more than maxBytes with 413. An oversize body is
 * drained (so the client can read the answer) up to a hard cap, past which the
 * connection is dropped.
 */
export function readBody(req: IncomingMessage, maxBytes: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    let ended = false;
    const tooLarge = () => new HttpError(413, `request body larger than ${maxBytes} bytes`);
    req.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size <= maxBytes) chunks.push(chunk);
      else if (size > maxBytes * 16 + (1 << 20)) req.destroy();
    });
    req.on('end', () => {
      ended = true;
      if (size > maxBytes) reject(tooLarge());
      else resolve(Buffer.concat(chunks).toString('utf8'));
    });
    req.on('close', () => {
      if (!ended) reject(size > maxBytes ? tooLarge() : new HttpError(400, 'request body ended early'));
    });
    req.on('error', (e) => reject(new HttpError(400, `reading the request body failed: ${e.message}`)));
  });
}

/** Parses a JSON object body; 400 naming the problem otherwise. */
export async function readJsonObject(req: IncomingMessage, maxBytes: number): Promise<Record<string, unknown>> {
  const text = await readBody(req, maxBytes);
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (e) {
    throw new HttpError(400, `malformed JSON body: ${(e as Error).message}`);
  }
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    throw new HttpError(400, 'request body must be a JSON object');
  }
  return value as Record<string, unknown>;
}

export function sendJson(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  if (res.headersSent || res.destroyed) return;
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json; charset=utf-8', 'content-length': Buffer.byteLength(text), ...headers });
  res.end(text);
}
