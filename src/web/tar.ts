// A run's files as one tar archive (POSIX ustar, no compression) for the page's
// download: every desktop opens one, and it takes no more than headers and padding.

const BLOCK = 512;

function field(header: Uint8Array, offset: number, length: number, text: string): void {
  const bytes = new TextEncoder().encode(text);
  if (bytes.length > length) throw new Error(`tar: "${text}" does not fit a ${length}-byte header field`);
  header.set(bytes, offset);
}

const octal = (n: number, length: number) => n.toString(8).padStart(length - 1, '0');

/** A ustar header block for a file of `size` bytes; names over 100 bytes go in the prefix field, split at a '/'. */
function header(name: string, size: number, mtime: number): Uint8Array {
  const h = new Uint8Array(BLOCK);
  let prefix = '';
  let base = name;
  if (new TextEncoder().encode(name).length > 100) {
    const cut = name.lastIndexOf('/', 155);
    if (cut <= 0) throw new Error(`tar: path too long for ustar: ${name}`);
    prefix = name.slice(0, cut);
    base = name.slice(cut + 1);
  }
  field(h, 0, 100, base);
  field(h, 100, 8, octal(0o644, 8));
  field(h, 108, 8, octal(0, 8));
  field(h, 116, 8, octal(0, 8));
  field(h, 124, 12, octal(size, 12));
  field(h, 136, 12, octal(Math.floor(mtime / 1000), 12));
  h.fill(0x20, 148, 156);
  h[156] = 0x30;
  field(h, 257, 6, 'ustar');
  field(h, 263, 2, '00');
  field(h, 345, 155, prefix);
  let sum = 0;
  for (const b of h) sum += b;
  field(h, 148, 7, octal(sum, 7));
  return h;
}

/** The archive of `files` (paths inside it, bytes). */
export function tarArchive(files: readonly { path: string; data: Uint8Array }[], mtime = Date.now()): Uint8Array {
  const size = files.reduce((n, f) => n + BLOCK + Math.ceil(f.data.length / BLOCK) * BLOCK, 2 * BLOCK);
  const out = new Uint8Array(size);
  let at = 0;
  for (const f of files) {
    out.set(header(f.path, f.data.length, mtime), at);
    out.set(f.data, at + BLOCK);
    at += BLOCK + Math.ceil(f.data.length / BLOCK) * BLOCK;
  }
  return out;
}
