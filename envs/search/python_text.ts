// The few Python string semantics the references' text handling rests on, where
// JavaScript's differ: str.split() and str.strip() without arguments split and strip
// on str.isspace() characters (the ASCII separators U+001C-U+001F and U+0085 are
// whitespace there, U+FEFF is not: the reverse of JavaScript's \s and trim()), and
// json.dumps with its default ensure_ascii, which SDAR's search tool wraps results in.

/** The characters for which Python's str.isspace() is true. */
const WS = '\\t\\n\\v\\f\\r\\x1c-\\x1f \\x85\\xa0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000';
const RUNS = new RegExp(`[${WS}]+`, 'g');
const EDGES = new RegExp(`^[${WS}]+|[${WS}]+$`, 'g');

/** Python's s.strip(). */
export function pyStrip(s: string): string {
  return s.replace(EDGES, '');
}

/** Python's s.split(): the words between runs of whitespace, none empty. */
export function pySplit(s: string): string[] {
  return s.split(RUNS).filter((w) => w !== '');
}

const SHORT_ESCAPES: Record<string, string> = { '"': '\\"', '\\': '\\\\', '\n': '\\n', '\r': '\\r', '\t': '\\t', '\b': '\\b', '\f': '\\f' };

/** A string as Python's json.dumps writes it (ensure_ascii): quoted, everything outside printable ASCII as \uXXXX (UTF-16 units, lower-case hex). */
export function pyJsonString(s: string): string {
  let out = '"';
  for (let i = 0; i < s.length; i++) {
    const ch = s[i];
    const code = s.charCodeAt(i);
    const short = SHORT_ESCAPES[ch];
    if (short !== undefined) out += short;
    else if (code < 0x20 || code > 0x7e) out += `\\u${code.toString(16).padStart(4, '0')}`;
    else out += ch;
  }
  return out + '"';
}
