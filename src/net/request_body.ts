// Bounded request bodies for the project's node:http servers (environments, `serve`).
// Each server passes its own error type, so failures become its answer shape.

import type { IncomingMessage } from './http_server.ts';

/** Makes the server's error for an HTTP status and message. */
export type HttpFailure = (status: number, message: string) => Error;

/**
 * Reads the whole body, refusing more than maxBytes with 413. An oversize body is
 * drained (so the client can read the answer) up to `drainBytes`, past which the
 * connection is dropped.
 */
export function readBody(req: IncomingMessage, maxBytes: number, fail: HttpFailure, drainBytes = maxBytes * 16 + (1 << 20)): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    let ended = false;
    const tooLarge = () => fail(413, `request body larger than ${maxBytes} bytes`);
    req.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size <= maxBytes) chunks.push(chunk);
      else if (size > drainBytes) req.destroy();
    });
    req.on('end', () => {
      ended = true;
      if (size > maxBytes) reject(tooLarge());
      else resolve(Buffer.concat(chunks).toString('utf8'));
    });
    req.on('close', () => {
      if (!ended) reject(size > maxBytes ? tooLarge() : fail(400, 'request body ended early'));
    });
    req.on('error', (e) => reject(fail(400, `reading the request body failed: ${e.message}`)));
  });
}

/** Parses a JSON object body; 400 naming the problem otherwise. */
export async function readJsonObject(req: IncomingMessage, maxBytes: number, fail: HttpFailure, drainBytes?: number): Promise<Record<string, unknown>> {
  const text = await readBody(req, maxBytes, fail, drainBytes);
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (e) {
    throw fail(400, `malformed JSON body: ${(e as Error).message}`);
  }
  if (value === null || typeof value !== 'object' || Array.isArray(value)) throw fail(400, 'request body must be a JSON object');
  return value as Record<string, unknown>;
}
