// Failures talking to the Hub, as messages that say what failed and what to do:
// @huggingface/hub's HubApiError carries the status and the Hub's JSON error, a network
// failure only its cause.

import { HubApiError } from '@huggingface/hub';

/** A Hub failure the user can act on: printed as its message, without a stack trace. */
export class HubError extends Error {
  override name = 'HubError';
}

export interface HubContext {
  repo: string;
  endpoint: string;
  token: string | undefined;
}

/** The Hub's answer for a repository that does not exist, or that this token may not see. */
export function repoNotFound(ctx: HubContext): HubError {
  const hint = ctx.token ? ' (or the token in HF_TOKEN may not read it)' : ', or it is private or gated and needs a token (HF_TOKEN)';
  return new HubError(`${ctx.repo}: no such model on the Hub at ${ctx.endpoint}${hint}`);
}

/** Whether `e` is a connection that failed or was cut, rather than an answer. */
export function isNetworkError(e: unknown): boolean {
  return !(e instanceof HubApiError) && !(e instanceof HubError);
}

export function networkCause(e: unknown): string {
  const err = e as { code?: string; message?: string; cause?: { code?: string; message?: string } };
  return err.cause?.code ?? err.code ?? err.cause?.message ?? err.message ?? String(e);
}

/**
 * `e`, thrown by a call for `what`, as a HubError. A download that cannot reach the Hub
 * may use the cache instead (HF_HUB_OFFLINE); an upload has no such way round.
 */
export function hubFailure(e: unknown, what: string, ctx: HubContext, direction: 'download' | 'upload' = 'download'): HubError {
  if (e instanceof HubError) return e;
  if (e instanceof HubApiError) {
    const said = typeof e.data?.error === 'string' ? e.data.error : e.message;
    if ((e.statusCode === 401 || e.statusCode === 404) && said === 'Repository not found') return repoNotFound(ctx);
    if (e.statusCode === 401) return new HubError(`${what}: the Hub refused the token (401: ${said}); check HF_TOKEN`);
    return new HubError(`${what}: the Hub answered ${e.statusCode}: ${said}`);
  }
  const remedy = direction === 'upload'
    ? 'an upload needs the Hub itself: check the network, or set HF_ENDPOINT to a Hub that takes uploads'
    : 'set HF_ENDPOINT for a mirror, or HF_HUB_OFFLINE=1 to use only the cache';
  return new HubError(`${what}: cannot reach the Hub at ${ctx.endpoint} (${networkCause(e)}); ${remedy}`);
}
