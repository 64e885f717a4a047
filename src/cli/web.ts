// `web`: builds the training page and serves it, with the files it fetches, from this
// machine (127.0.0.1, a secure context, so the browser offers it WebGPU).

import { defineCommand } from 'citty';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { createServer } from '../net/http_server.ts';
import { listen } from '../net/listen.ts';
import { intArg } from './args.ts';
import { buildPage, pageFiles, repositoryRoot } from './web_build.ts';

const TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.json': 'application/json',
  '.md': 'text/markdown; charset=utf-8',
  '.jinja': 'text/plain; charset=utf-8',
};

export interface PageServer {
  url: string;
  close(): Promise<void>;
}

/** Builds the page and serves it on host:port (0: a free port). */
export async function servePage(host: string, port: number, log: (line: string) => void = console.log): Promise<PageServer> {
  const root = repositoryRoot();
  const t0 = performance.now();
  const script = await buildPage(root);
  const files = pageFiles(root);
  const html = fs.readFileSync(path.join(root, 'src', 'web', 'index.html'));
  log(`built the page (${(script.length / 1024).toFixed(0)} KB of script) in ${((performance.now() - t0) / 1000).toFixed(1)} s`);
  const served = new Map<string, () => Uint8Array | string>([
    ['/', () => html],
    ['/index.html', () => html],
    ['/app.js', () => script],
    ['/files.json', () => JSON.stringify({ files })],
    ...files.map((f) => [`/${f}`, () => fs.readFileSync(path.join(root, f))] as const),
  ]);
  const server = createServer((req, res) => {
    const at = decodeURIComponent(new URL(req.url ?? '/', 'http://page').pathname);
    const body = req.method === 'GET' || req.method === 'HEAD' ? served.get(at) : undefined;
    if (!body) {
      res.writeHead(404, { 'content-type': 'text/plain' }).end(`${at}: not served here\n`);
      return;
    }
    const type = TYPES[path.extname(at === '/' ? 'index.html' : at)] ?? 'application/octet-stream';
    res.writeHead(200, { 'content-type': type, 'cache-control': 'no-store' });
    res.end(req.method === 'HEAD' ? undefined : body());
  });
  const { origin } = await listen(server, port, host);
  return { url: `${origin}/`, close: () => new Promise((resolve) => server.close(() => resolve())) };
}

export const webCommand = defineCommand({
  meta: {
    name: 'web',
    description: 'Build the training page and serve it (http://127.0.0.1:8080 unless PORT says otherwise): the embedded default trains in a browser tab on its WebGPU; docs/BROWSER.md',
  },
  args: {
    host: { type: 'string', description: 'address to bind (127.0.0.1 and localhost are secure contexts, which WebGPU needs)', default: '127.0.0.1' },
    port: { type: 'string', description: 'port (default: PORT, else 8080; 0 picks a free one)' },
  },
  async run({ args }) {
    const port = intArg('--port', args.port ?? process.env.PORT ?? '8080', 0);
    const page = await servePage(args.host, port);
    console.log(`open ${page.url} (?iterations=2&method=sdar&tasks=2&groupSize=2&maxTurns=2 sets the recipe); Ctrl-C stops the server`);
  },
});
