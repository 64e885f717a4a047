/** A failure reported by the GPU: no adapter, a validation error naming the kernel, a lost device. */
export class GpuError extends Error {
  override name = 'GpuError';
}

/** The device is gone (driver reset, out of memory, destroyed); nothing on it can be used again. */
export class DeviceLostError extends GpuError {
  override name = 'DeviceLostError';
}
