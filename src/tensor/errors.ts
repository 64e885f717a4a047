/** Tensor shapes that do not fit together; the message names the op and the shapes. */
export class ShapeError extends Error {
  override name = 'ShapeError';
}

/** A dtype an op does not accept. */
export class DTypeError extends Error {
  override name = 'DTypeError';
}

/** Use of a tensor after it was disposed (explicitly or by the end of its scope). */
export class DisposedError extends Error {
  override name = 'DisposedError';
}
