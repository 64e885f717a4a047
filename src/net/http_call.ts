// One JSON request to a server (generation, retrieval) with a deadline and bounded retries:
// connection failures and 5xx answers are retried with exponential backoff, 4xx
// answers never (the request itself is wrong), and every error names the URL and
// what went wrong.

export class EngineHttpError extends Error {
  override name = 'EngineHttpError';
  constructor(
    message: string,
    /** The HTTP status when the server answered; null for network failures and timeouts. */
    readonly status: number | null,
    readonly url: string,
  ) {
    super(message);
  }
}

export interface RetryOptions {
  /** Deadline per attempt, answer body included. */
  timeoutMs: number;
  /** Attempts after the first. */
  retries: number;
  /** Wait before the first retry; doubles each time up to maxBackoffMs. */
  backoffMs: number;
  maxBackoffMs: number;
  /** Also retry attempts that ran out of time (off by default: a slow server is not helped by the same work again). */
  retryTimeouts: boolean;
}

export interface HttpCall {
  url: string;
  method: 'GET' | 'POST';
  body?: unknown;
  apiKey?: string;
}

/** The server's own explanation from an error answer: OpenAI/vLLM {"error": {"message"}}, FastAPI {"detail"}, or the text. */
export function serverMessage(text: string): string {
  try {
    const v = JSON.parse(text) as Record<string, unknown>;
    const e = v?.error as Record<string, unknown> | string | undefined;
    if (typeof e === 'string') return e;
    if (e && typeof e.message === 'string') return e.message;
    if (typeof v?.message === 'string') return v.message;
    if (v?.detail !== undefined) return typeof v.detail === 'string' ? v.detail : JSON.stringify(v.detail);
  } catch {
    // not JSON: the text itself says it
  }
  return text.slice(0, 500);
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** The answer's body: parsed JSON when it is JSON, else the text. */
export async function callServer(call: HttpCall, opts: RetryOptions): Promise<unknown> {
  const what = `${call.method} ${call.url}`;
  const attempts = opts.retries + 1;
  let last = '';
  let lastStatus: number | null = null;
  for (let attempt = 1; attempt <= attempts; attempt++) {
    if (attempt > 1) await sleep(Math.min(opts.maxBackoffMs, opts.backoffMs * 2 ** (attempt - 2)));
    const headers: Record<string, string> = {};
    if (call.body !== undefined) headers['content-type'] = 'application/json';
    if (call.apiKey) headers.authorization = `Bearer ${call.apiKey}`;
    let status: number;
    let text: string;
    try {
      const res = await fetch(call.url, {
        method: call.method,
        headers,
        body: call.body === undefined ? undefined : JSON.stringify(call.body),
        signal: AbortSignal.timeout(opts.timeoutMs),
      });
      status = res.status;
      text = await res.text();
    } catch (e) {
      const err = e as Error;
      if (err.name === 'TimeoutError' || err.name === 'AbortError') {
        last = `no answer within ${opts.timeoutMs} ms`;
        if (!opts.retryTimeouts) throw new EngineHttpError(`${what}: ${last} (the server is stalled or too slow; raise timeoutMs?)`, null, call.url);
      } else {
        const cause = err.cause as { code?: string; message?: string } | undefined;
        last = `cannot reach the server (${cause?.code ?? cause?.message ?? err.message}; is it running at that address?)`;
      }
      lastStatus = null;
      continue;
    }
    if (status >= 200 && status < 300) {
      try {
        return JSON.parse(text);
      } catch {
        return text;
      }
    }
    last = `answered ${status}: ${serverMessage(text)}`;
    lastStatus = status;
    if (status < 500) throw new EngineHttpError(`${what} ${last}`, status, call.url);
  }
  throw new EngineHttpError(`${what}: ${last} (gave up after ${attempts} attempt${attempts > 1 ? 's' : ''})`, lastStatus, call.url);
}
