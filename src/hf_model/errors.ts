/** A config.json this code cannot run faithfully; the message names the field. */
export class ConfigError extends Error {
  override name = 'ConfigError';
}

/** A checkpoint or adapter directory whose tensors do not match what its config implies. */
export class CheckpointError extends Error {
  override name = 'CheckpointError';
}
