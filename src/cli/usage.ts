// `--help` text. citty's own renderer pads every option line to the longest
// description (hundreds of columns), colours whatever the output is, and appends each
// default after descriptions that often state it already; this one wraps to the
// terminal (80 columns when the output is not one), colours only a terminal that has
// not asked for none (NO_COLOR, TERM=dumb), and prints each default once.

import type { ArgDef, CommandDef } from 'citty';

export interface UsageStyle {
  width: number;
  color: boolean;
}

/** The style for `stream`: its width and colours when it is a terminal, else 80 plain columns. */
export function usageStyle(stream: { isTTY?: boolean; columns?: number } = process.stdout, env: NodeJS.ProcessEnv = process.env): UsageStyle {
  const tty = stream.isTTY === true;
  return {
    width: tty && stream.columns ? Math.max(40, Math.min(stream.columns, 100)) : 80,
    color: tty && !env.NO_COLOR && env.TERM !== 'dumb',
  };
}

/** The longest option label that keeps its description on the same line. */
const LABEL_MAX = 26;

/** `text` broken into lines of at most `width` columns (a longer word keeps its own line). */
export function wrap(text: string, width: number): string[] {
  const lines: string[] = [];
  let line = '';
  for (const word of text.split(/\s+/).filter(Boolean)) {
    if (line && line.length + 1 + word.length > width) {
      lines.push(line);
      line = word;
    } else {
      line = line ? `${line} ${word}` : word;
    }
  }
  if (line) lines.push(line);
  return lines;
}

function resolved<T>(v: unknown): T {
  if (typeof v === 'function' || v instanceof Promise) throw new Error('usage: commands must be defined with plain objects');
  return v as T;
}

function describe(def: ArgDef): string {
  const text = def.description ?? '';
  // A boolean's default false is what leaving the flag out means: not worth a word.
  if (def.default === undefined || def.default === false) return text;
  return `${text} [default: ${def.default}]`;
}

/** The help text of `cmd`, reached as `path` (["webgpu-agent-trainer", "env", "serve"]). */
export function renderUsage(cmd: CommandDef, path: readonly string[], style: UsageStyle): string {
  const paint = (code: number) => (s: string) => (style.color ? `\x1b[${code}m${s}\x1b[0m` : s);
  const heading = paint(1);
  const name = paint(36);
  const meta = resolved<{ description?: string }>(cmd.meta ?? {});
  const args = Object.entries(resolved<Record<string, ArgDef>>(cmd.args ?? {}));
  const subs = Object.entries(resolved<Record<string, CommandDef>>(cmd.subCommands ?? {}));
  const positionals = args.filter(([, d]) => d.type === 'positional');
  const options = args.filter(([, d]) => d.type !== 'positional');

  const rows = (entries: [label: string, text: string][]): string[] => {
    const labelWidth = Math.min(LABEL_MAX, Math.max(...entries.map(([l]) => l.length)));
    const indent = 2 + labelWidth + 2;
    const textWidth = Math.max(20, style.width - indent);
    return entries.flatMap(([label, text]) => {
      const lines = wrap(text, textWidth);
      const pad = ' '.repeat(indent);
      if (label.length > labelWidth) return [`  ${name(label)}`, ...lines.map((l) => pad + l)];
      const first = `  ${name(label)}${' '.repeat(labelWidth - label.length + 2)}${lines[0] ?? ''}`.trimEnd();
      return [first, ...lines.slice(1).map((l) => pad + l)];
    });
  };

  const usage = [
    ...path,
    ...(subs.length ? ['<command>'] : []),
    ...(options.length ? ['[options]'] : []),
    ...positionals.map(([n, d]) => (d.required === false || d.default !== undefined ? `[${n.toUpperCase()}]` : n.toUpperCase())),
  ].join(' ');
  const out: string[] = [...wrap(meta.description ?? '', style.width), '', `${heading('Usage:')} ${usage}`];
  if (positionals.length) out.push('', heading('Arguments:'), ...rows(positionals.map(([n, d]) => [n.toUpperCase(), describe(d)])));
  if (options.length) {
    const label = ([n, d]: [string, ArgDef]) => {
      const aliases = 'alias' in d && d.alias ? (Array.isArray(d.alias) ? d.alias : [d.alias]) : [];
      const flags = [...aliases.map((a) => (a.length === 1 ? `-${a}` : `--${a}`)), `--${n}`].join(', ');
      return d.type === 'boolean' ? flags : `${flags} <${d.valueHint ?? 'value'}>`;
    };
    out.push('', heading('Options:'), ...rows([...options.map((o): [string, string] => [label(o), describe(o[1])]), ['-h, --help', 'show this help']]));
  }
  if (subs.length) {
    out.push('', heading('Commands:'), ...rows(subs.map(([n, sub]) => [n, resolved<{ description?: string }>(sub.meta ?? {}).description ?? ''])));
    out.push('', ...wrap(`\`${path.join(' ')} <command> --help\` shows a command's arguments and options.`, style.width));
  }
  return out.join('\n') + '\n';
}
