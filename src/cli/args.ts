// Validation of command-line values citty leaves as strings.

/** A user error: printed as a message, without a stack trace. */
export class CliError extends Error {
  override name = 'CliError';
}

export function intArg(flag: string, value: string | undefined, min = -Infinity, max = Infinity): number {
  const n = Number(value);
  if (value === undefined || value.trim() === '' || !Number.isInteger(n) || n < min || n > max) {
    throw new CliError(`${flag} ${value ?? ''}: expected an integer${min > -Infinity ? ` >= ${min}` : ''}${max < Infinity ? ` and <= ${max}` : ''}`);
  }
  return n;
}

export function numberArg(flag: string, value: string | undefined, min = -Infinity): number {
  const n = Number(value);
  if (value === undefined || value.trim() === '' || !Number.isFinite(n) || n < min) throw new CliError(`${flag} ${value ?? ''}: expected a number${min > -Infinity ? ` >= ${min}` : ''}`);
  return n;
}

/** Positional words of `command`: at most one config file, then key=value overrides (in any order). */
export function configWords(command: string, words: readonly string[] = []): { file: string | undefined; overrides: string[] } {
  const files = words.filter((w) => !w.includes('='));
  if (files.length > 1) throw new CliError(`${command}: one config file expected, got ${files.join(', ')}`);
  return { file: files[0], overrides: words.filter((w) => w.includes('=')) };
}
