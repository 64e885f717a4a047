// Refusing options a command does not define. citty ignores an unknown flag, so a
// misspelling (`--iteratons 3`) silently runs with the default instead; every command
// line is checked against the definition of the command it reaches first.

import type { ArgsDef, CommandDef } from 'citty';
import { CliError } from './args.ts';

interface Resolved {
  /** The command path as typed ("env serve"). */
  name: string;
  args: ArgsDef;
  /** The words after the command path. */
  words: string[];
}

const plain = <T>(v: unknown, what: string): T => {
  if (typeof v === 'function' || v instanceof Promise) throw new Error(`strict_args: ${what} must be given as a plain object`);
  return v as T;
};

/** The command `rawArgs` reaches (subcommands are the leading words that name one), or null for a word naming none, which citty reports. */
function resolve(cmd: CommandDef, rawArgs: readonly string[], name: string): Resolved | null {
  const subs = plain<Record<string, CommandDef> | undefined>(cmd.subCommands, `${name} subCommands`);
  if (subs && Object.keys(subs).length) {
    const first = rawArgs[0];
    if (first === undefined || first.startsWith('-')) return null;
    if (!Object.hasOwn(subs, first)) return null;
    return resolve(plain<CommandDef>(subs[first], `${name} ${first}`), rawArgs.slice(1), `${name} ${first}`.trim());
  }
  return { name, args: plain<ArgsDef | undefined>(cmd.args, `${name} args`) ?? {}, words: [...rawArgs] };
}

const kebab = (s: string) => s.replace(/([a-z0-9])([A-Z])/g, '$1-$2').toLowerCase();

function editDistance(a: string, b: string): number {
  const row = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    let diag = row[0];
    row[0] = i;
    for (let j = 1; j <= b.length; j++) {
      const up = row[j];
      row[j] = Math.min(row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] === b[j - 1] ? 0 : 1));
      diag = up;
    }
  }
  return row[b.length];
}

/** Throws a CliError naming the first option `rawArgs` gives that its command does not define (with the closest one it does). */
export function assertKnownOptions(root: CommandDef, rawArgs: readonly string[], rootName = ''): void {
  const target = resolve(root, rawArgs, rootName);
  if (!target) return;
  const { name, args, words } = target;
  const options = new Map<string, 'boolean' | 'string'>();
  for (const [key, def] of Object.entries(args)) {
    if (def.type === 'positional') continue;
    const kind = def.type === 'boolean' ? 'boolean' : 'string';
    const aliases = 'alias' in def && def.alias ? (Array.isArray(def.alias) ? def.alias : [def.alias]) : [];
    for (const n of [key, kebab(key), ...aliases]) options.set(n, kind);
  }
  options.set('help', 'boolean');
  for (let i = 0; i < words.length; i++) {
    const word = words[i];
    if (word === '--') return;
    if (!word.startsWith('-') || word === '-') continue;
    const body = word.replace(/^--?/, '');
    const eq = body.indexOf('=');
    const flag = eq < 0 ? body : body.slice(0, eq);
    if (word === '-h') continue;
    let kind = options.get(flag) ?? options.get(kebab(flag));
    if (kind === undefined && flag.startsWith('no-') && options.get(flag.slice(3)) === 'boolean') kind = 'boolean';
    if (kind === undefined) {
      const known = [...new Set(Object.keys(args).filter((k) => args[k].type !== 'positional'))];
      const near = known.map((k) => ({ k, d: editDistance(flag, k) })).sort((a, b) => a.d - b.d)[0];
      const hint = near && near.d <= Math.max(2, Math.floor(near.k.length / 3)) ? `; did you mean --${near.k}?` : '';
      throw new CliError(`${name ? `${name}: ` : ''}unknown option ${word.slice(0, word.length - (eq < 0 ? 0 : body.length - eq))}${hint} (\`${name ? `${name} ` : ''}--help\` lists the options)`);
    }
    // A string option's value is the next word unless given as --name=value.
    if (kind === 'string' && eq < 0) i++;
  }
}
