// Errors an environment throws so that servers can answer with the right HTTP status
// instead of a generic 500.

/** The caller asked for something malformed or impossible (bad task, bad seed): HTTP 400. */
export class EnvInputError extends Error {
  override name = 'EnvInputError';
}

/** A step was sent to an episode that has already ended: HTTP 409. */
export class EpisodeDoneError extends Error {
  override name = 'EpisodeDoneError';
}
