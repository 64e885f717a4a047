// One JSON request to a server (generation, retrieval, weight sync) with a deadline per
// attempt and retries bounded by a count and by a total time: connection failures and
// 5xx answers are retried with exponential backoff, timeouts only when asked, 4xx
// answers never (the request itself is wrong). A hook before every retry can report
// the wait, repair the server (a restarted one gets its weights back) or give up
// (another server can take the work). Every error names the URL and what went wrong.

/** Why a call failed: no connection, no answer in time, a 5xx, a 4xx, or an answer the caller could not use. */
export type FailureKind = 'unreachable' | 'timeout' | 'server' | 'client' | 'malformed';

export class EngineHttpError extends Error {
  override name = 'EngineHttpError';
  constructor(
    message: string,
    /** The HTTP status when the server answered; null for network failures and timeouts. */
    readonly status: number | null,
    readonly url: string,
    readonly kind: FailureKind = status === null ? 'unreachable' : status >= 500 ? 'server' : 'client',
  ) {
    super(message);
  }
}

/** What a failed attempt was, as the retry hook sees it. */
export interface AttemptFailure {
  url: string;
  /** 1 for the first attempt. */
  attempt: number;
  kind: FailureKind;
  status: number | null;
  /** The server's explanation or the network error. */
  reason: string;
  /** Since the first attempt started. */
  elapsedMs: number;
  /** When the retries stop: elapsedMs past this gives up (Infinity: only the count bounds them). */
  deadlineMs: number;
}

export interface RetryOptions {
  /** Deadline per attempt, answer body included. */
  timeoutMs: number;
  /** Attempts after the first (Infinity: only deadlineMs bounds them). */
  retries: number;
  /** No retry starts once this long has passed since the first attempt (default: no limit). */
  deadlineMs?: number;
  /** Wait before the first retry; doubles each time up to maxBackoffMs. */
  backoffMs: number;
  maxBackoffMs: number;
  /** Also retry attempts that ran out of time (off by default: a slow server is not helped by the same work again). */
  retryTimeouts: boolean;
  /** Statuses worth another attempt (default: 5xx). */
  retryStatus?: (status: number) => boolean;
  /**
   * Awaited after a retryable failure, before the backoff and the next attempt. It may
   * report the wait, bring the server back to the state the request needs, or throw to
   * stop retrying (its error is what the call throws).
   */
  beforeRetry?: (failure: AttemptFailure) => Promise<void> | void;
}

export interface HttpCall {
  url: string;
  method: 'GET' | 'POST';
  body?: unknown;
  apiKey?: string;
}

/** The server's own explanation from an error answer: OpenAI/vLLM {"error": {"message"}} or {"error": "..."}, FastAPI {"detail"}, or the text. */
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

const defaultRetryStatus = (status: number) => status >= 500;

/** The answer's body: parsed JSON when it is JSON, else the text. */
export async function callServer(call: HttpCall, opts: RetryOptions): Promise<unknown> {
  const what = `${call.method} ${call.url}`;
  const started = performance.now();
  const deadline = opts.deadlineMs ?? Infinity;
  const retryStatus = opts.retryStatus ?? defaultRetryStatus;
  let last = '';
  let lastStatus: number | null = null;
  let lastKind: FailureKind = 'unreachable';
  let attempt = 0;
  for (;;) {
    attempt++;
    const headers: Record<string, string> = {};
    if (call.body !== undefined) headers['content-type'] = 'application/json';
    if (call.apiKey) headers.authorization = `Bearer ${call.apiKey}`;
    try {
      const res = await fetch(call.url, {
        method: call.method,
        headers,
        body: call.body === undefined ? undefined : JSON.stringify(call.body),
        signal: AbortSignal.timeout(opts.timeoutMs),
      });
      const text = await res.text();
      if (res.status >= 200 && res.status < 300) {
        try {
          return JSON.parse(text);
        } catch {
          return text;
        }
      }
      last = `answered ${res.status}: ${serverMessage(text)}`;
      lastStatus = res.status;
      lastKind = res.status >= 500 ? 'server' : 'client';
      if (!retryStatus(res.status)) throw new EngineHttpError(`${what} ${last}`, res.status, call.url, lastKind);
    } catch (e) {
      if (e instanceof EngineHttpError) throw e;
      const err = e as Error;
      lastStatus = null;
      if (err.name === 'TimeoutError' || err.name === 'AbortError') {
        last = `no answer within ${opts.timeoutMs} ms`;
        lastKind = 'timeout';
        if (!opts.retryTimeouts) throw new EngineHttpError(`${what}: ${last} (the server is stalled or too slow; raise timeoutMs?)`, null, call.url, 'timeout');
      } else {
        const cause = err.cause as { code?: string; message?: string } | undefined;
        // Node puts the system error's code on the cause, Bun on the error itself.
        const code = cause?.code ?? (err as { code?: string }).code;
        last = `cannot reach the server (${code ?? cause?.message ?? err.message}; is it running at that address?)`;
        lastKind = 'unreachable';
      }
    }
    const elapsedMs = performance.now() - started;
    const wait = Math.min(opts.maxBackoffMs, opts.backoffMs * 2 ** (attempt - 1));
    if (attempt > opts.retries || elapsedMs + wait > deadline) break;
    await opts.beforeRetry?.({ url: call.url, attempt, kind: lastKind, status: lastStatus, reason: last, elapsedMs, deadlineMs: deadline });
    await sleep(wait);
  }
  const waited = (performance.now() - started) / 1000;
  throw new EngineHttpError(
    `${what}: ${last} (gave up after ${attempt} attempt${attempt > 1 ? 's' : ''}${waited >= 1 ? ` over ${waited.toFixed(0)} s` : ''})`,
    lastStatus, call.url, lastKind,
  );
}
