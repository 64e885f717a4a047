/** A config.json this code cannot run faithfully; the message names the field. */
export class ConfigError extends Error {
  override name = 'ConfigError';
}

/** A safetensors file that is malformed, truncated or holds an unusable tensor; the message names the file and tensor. */
export class SafetensorsError extends Error {
  override name = 'SafetensorsError';
}

/** A checkpoint or adapter directory whose tensors do not match what its config implies. */
export class CheckpointError extends Error {
  override name = 'CheckpointError';
}
