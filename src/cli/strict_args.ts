// Refusing commands and options that are not defined. citty ignores an unknown flag, so
// a misspelling (`--iteratons 3`) silently runs with the default instead, and names an
// unknown command without the one meant; every command line is checked against the
// definition of the command it reaches first.

import type { ArgsDef, CommandDef } from 'citty';
import { CliError } from './args.ts';

export interface Resolved {
  /** The command path as typed ("env serve"). */
  name: string;
  cmd: CommandDef;
  args: ArgsDef;
  /** The words after the command path. */
  words: string[];
  /** Whether the command is a group that needs one of its subcommands, and none was given. */
  incomplete: boolean;
}

const plain = <T>(v: unknown, what: string): T => {
  if (typeof v === 'function' || v instanceof Promise) throw new Error(`strict_args: ${what} must be given as a plain object`);
  return v as T;
};

/** The command `rawArgs` reaches: subcommands are the leading words that name one; a word that names none is refused, with the closest name. */
export function resolveCommand(cmd: CommandDef, rawArgs: readonly string[], name = ''): Resolved {
  const subs = plain<Record<string, CommandDef> | undefined>(cmd.subCommands, `${name} subCommands`);
  const args = plain<ArgsDef | undefined>(cmd.args, `${name} args`) ?? {};
  if (subs && Object.keys(subs).length) {
    const first = rawArgs[0];
    if (first === undefined || first.startsWith('-')) return { name, cmd, args, words: [...rawArgs], incomplete: true };
    if (!Object.hasOwn(subs, first)) {
      const hint = closest(first, Object.keys(subs));
      throw new CliError(`${name ? `${name}: ` : ''}unknown command ${first}${hint ? `; did you mean ${hint}?` : ''} (commands: ${Object.keys(subs).join(', ')})`);
    }
    return resolveCommand(plain<CommandDef>(subs[first], `${name} ${first}`), rawArgs.slice(1), `${name} ${first}`.trim());
  }
  return { name, cmd, args, words: [...rawArgs], incomplete: false };
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

/** The name in `known` nearest `word`, when it is near enough to be the one meant. */
function closest(word: string, known: readonly string[]): string | null {
  const near = known.map((k) => ({ k, d: editDistance(word, k) })).sort((a, b) => a.d - b.d)[0];
  return near && near.d <= Math.max(2, Math.floor(near.k.length / 3)) ? near.k : null;
}

/** Throws a CliError naming the first command or option `rawArgs` gives that is not defined (with the closest one that is). */
export function assertKnownOptions(root: CommandDef, rawArgs: readonly string[], rootName = ''): void {
  const { name, args, words, incomplete } = resolveCommand(root, rawArgs, rootName);
  if (incomplete) return;
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
      const near = closest(flag, Object.keys(args).filter((k) => args[k].type !== 'positional'));
      const hint = near ? `; did you mean --${near}?` : '';
      throw new CliError(`${name ? `${name}: ` : ''}unknown option ${word.slice(0, word.length - (eq < 0 ? 0 : body.length - eq))}${hint} (\`${name ? `${name} ` : ''}--help\` lists the options)`);
    }
    // A string option's value is the next word unless given as --name=value.
    if (kind === 'string' && eq < 0) i++;
  }
}
