// The safetensors format's own error, for files this reader or writer cannot take.

/** A safetensors file that is malformed, truncated or holds an unusable tensor; the message names the file and tensor. */
export class SafetensorsError extends Error {
  override name = 'SafetensorsError';
}
