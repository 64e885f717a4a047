// JSON over fetch with a deadline, and errors that say which server and which request
// failed. Shared by the clients of our protocol and of AgentGym-style servers.

export class RemoteEnvError extends Error {
  override name = 'RemoteEnvError';
  constructor(
    message: string,
    /** HTTP status when the server answered; null for network errors and timeouts. */
    readonly status: number | null = null,
  ) {
    super(message);
  }
}

/**
 * The server no longer knows the session a request named (it restarted, or reclaimed
 * it): the episode in it is gone, though the server is there. The agent loop starts
 * such an episode over once in a new session.
 */
export class SessionLostError extends RemoteEnvError {
  override name = 'SessionLostError';
}

export interface JsonRequest {
  /** Who we are talking to, for messages: "household server http://127.0.0.1:8101". */
  label: string;
  baseUrl: string;
  method: 'GET' | 'POST' | 'DELETE';
  /** Path with any query string: "/envs/abc/step". */
  path: string;
  body?: unknown;
  timeoutMs: number;
}

export interface JsonAnswer {
  status: number;
  body: unknown;
}

/** Sends one request; throws RemoteEnvError on network failure, timeout or a non-JSON answer. Status codes are the caller's to judge. */
export async function fetchJson(r: JsonRequest): Promise<JsonAnswer> {
  const what = `${r.label}: ${r.method} ${r.path}`;
  let res: Response;
  try {
    res = await fetch(new URL(r.path, r.baseUrl), {
      method: r.method,
      headers: r.body === undefined ? {} : { 'content-type': 'application/json' },
      body: r.body === undefined ? undefined : JSON.stringify(r.body),
      signal: AbortSignal.timeout(r.timeoutMs),
    });
  } catch (e) {
    const err = e as Error;
    if (err.name === 'TimeoutError' || err.name === 'AbortError') throw new RemoteEnvError(`${what} timed out after ${r.timeoutMs} ms`);
    throw new RemoteEnvError(`${what} failed: ${err.message}${err.cause ? ` (${(err.cause as Error).message ?? err.cause})` : ''}`);
  }
  let text: string;
  try {
    text = await res.text();
  } catch (e) {
    throw new RemoteEnvError(`${what}: reading the answer failed: ${(e as Error).message}`, res.status);
  }
  try {
    return { status: res.status, body: text === '' ? null : JSON.parse(text) };
  } catch {
    throw new RemoteEnvError(`${what} -> ${res.status}: answer is not JSON: ${text.slice(0, 200)}`, res.status);
  }
}

export function isObject(v: unknown): v is Record<string, unknown> {
  return v !== null && typeof v === 'object' && !Array.isArray(v);
}

export function isStringArray(v: unknown): v is string[] {
  return Array.isArray(v) && v.every((x) => typeof x === 'string');
}
