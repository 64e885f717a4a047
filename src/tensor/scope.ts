// Step-scoped GPU memory. JavaScript's collector does not see GPU buffers, so every
// tensor made inside `scope(fn)` is disposed when fn returns, except the tensors fn
// returns (they move to the enclosing scope) and those passed to `keep`. Tensors made
// outside any scope (parameters, optimizer state) live until disposed explicitly.

/** What a scope holds: a Tensor (tensor.ts tracks each one it makes). */
export interface Scoped {
  readonly isTensor: true;
  dispose(): void;
}

const stack: Set<Scoped>[] = [];

export function track(t: Scoped): void {
  stack[stack.length - 1]?.add(t);
}

/** Takes a tensor out of every scope: it lives until `dispose()`. */
export function keep<T extends Scoped>(t: T): T {
  for (const s of stack) s.delete(t);
  return t;
}

function collect(value: unknown, into: Set<Scoped>, seen = new Set<unknown>()): void {
  if (value === null || typeof value !== 'object' || seen.has(value)) return;
  seen.add(value);
  if ((value as { isTensor?: boolean }).isTensor === true) {
    into.add(value as Scoped);
    return;
  }
  if (Array.isArray(value)) {
    for (const v of value) collect(v, into, seen);
  } else if (value instanceof Map) {
    for (const v of value.values()) collect(v, into, seen);
  } else if (Object.getPrototypeOf(value) === Object.prototype) {
    for (const v of Object.values(value)) collect(v, into, seen);
  }
}

function close(frame: Set<Scoped>, result: unknown): void {
  const survivors = new Set<Scoped>();
  collect(result, survivors);
  stack.pop();
  const parent = stack[stack.length - 1];
  for (const t of frame) {
    if (survivors.has(t)) parent?.add(t);
    else t.dispose();
  }
}

/** Runs fn; disposes every tensor it made except what it returns. */
export function scope<T>(fn: () => T): T {
  const frame = new Set<Scoped>();
  stack.push(frame);
  let result: T;
  try {
    result = fn();
  } catch (e) {
    close(frame, undefined);
    throw e;
  }
  if (result instanceof Promise) {
    close(frame, undefined);
    throw new Error('scope(fn): fn returned a Promise; use scopeAsync');
  }
  close(frame, result);
  return result;
}

/**
 * The async form. Scopes are a stack, so async scopes must not interleave (run one
 * training step at a time).
 */
export async function scopeAsync<T>(fn: () => Promise<T>): Promise<T> {
  const frame = new Set<Scoped>();
  stack.push(frame);
  let result: T;
  try {
    result = await fn();
  } catch (e) {
    if (stack[stack.length - 1] === frame) close(frame, undefined);
    throw e;
  }
  if (stack[stack.length - 1] !== frame) throw new Error('scopeAsync: scopes interleaved (two async scopes ran at once)');
  close(frame, result);
  return result;
}

export function scopeDepth(): number {
  return stack.length;
}
