// Errors of the generation engines that are the caller's fault, kept apart from GPU
// and I/O failures so a server can answer them with a 4xx.

/** A request an engine cannot run as given; the message names the request and the field. */
export class EngineRequestError extends Error {
  override name = 'EngineRequestError';
  constructor(
    message: string,
    /** not_found: an unknown model or adapter name; invalid: anything else. */
    readonly kind: 'invalid' | 'not_found' = 'invalid',
  ) {
    super(message);
  }
}
