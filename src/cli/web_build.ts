// The training page's build: src/web/page.ts bundled for the browser by Bun.build, with
// browser_platform.ts in storage/platform.ts's place (so the trainer reads and writes
// through the page's storage) and the shaders' text as the module wgt:shaders; and
// the list of files the page fetches beside it (the bundled model, its tokenizer, the
// environments' skill cards), which the server serves and nothing else of the tree.

import * as fs from 'node:fs';
import * as path from 'node:path';
import { shippedFile } from '../storage/storage.ts';

/** The part of Bun.build this build uses (Bun's own types are not in this tree's). */
interface BunBuild {
  build(options: {
    entrypoints: string[];
    target: 'browser';
    format: 'esm';
    minify?: boolean;
    sourcemap?: 'none' | 'inline';
    external?: string[];
    plugins?: {
      name: string;
      setup(build: {
        onResolve(o: { filter: RegExp }, cb: (a: { path: string; importer: string }) => { path: string; namespace?: string } | undefined): void;
        onLoad(o: { filter: RegExp; namespace: string }, cb: () => { contents: string; loader: 'js' }): void;
      }): void;
    }[];
  }): Promise<{ success: boolean; logs: unknown[]; outputs: { text(): Promise<string> }[] }>;
}

/** What a page is built from: the repository's root (the folder holding src/web/page.ts). */
export function repositoryRoot(): string {
  const page = shippedFile(path.join('src', 'web', 'page.ts'));
  if (!page) throw new Error('web: src/web/page.ts is not among the files this program ships with; run it from a checkout of the repository');
  return path.resolve(path.dirname(page), '..', '..');
}

function filesUnder(root: string, dir: string): string[] {
  const abs = path.join(root, dir);
  if (!fs.existsSync(abs)) return [];
  return fs.readdirSync(abs, { withFileTypes: true }).flatMap((e) => {
    const rel = `${dir}/${e.name}`;
    return e.isDirectory() ? filesUnder(root, rel) : [rel];
  }).sort();
}

/** The files the page fetches from its server, as paths from the repository's root. */
export function pageFiles(root: string): string[] {
  const model = filesUnder(root, 'models/household-tiny');
  if (!model.some((f) => f.endsWith('/config.json'))) throw new Error(`web: ${path.join(root, 'models/household-tiny')} holds no model; make it with \`bun run cli make-default-model\``);
  return [...model, ...['household', 'shop', 'search'].flatMap((env) => filesUnder(root, `envs/${env}/skills`))];
}

/** shaders/ as one module: { "<path from shaders/>": text }. */
function shaderModule(root: string): string {
  const files = filesUnder(root, 'shaders').filter((f) => f.endsWith('.wgsl'));
  const texts = Object.fromEntries(files.map((f) => [f.slice('shaders/'.length), fs.readFileSync(path.join(root, f), 'utf8')]));
  return `export default ${JSON.stringify(texts)};`;
}

/** The page's script: one ES module, built in memory. */
export async function buildPage(root: string): Promise<string> {
  const bun = (globalThis as unknown as { Bun?: BunBuild }).Bun;
  if (!bun) throw new Error('web: the page is built with Bun.build; run it as `npx bun run web`');
  const storageDir = path.join(root, 'src', 'storage');
  const result = await bun.build({
    entrypoints: [path.join(root, 'src', 'web', 'page.ts')],
    target: 'browser',
    format: 'esm',
    minify: true,
    // The page reaches WebGPU through navigator.gpu; Dawn's package is never loaded there.
    external: ['webgpu'],
    plugins: [{
      name: 'wgt-page',
      setup(build) {
        build.onResolve({ filter: /^\.\/platform\.ts$/ }, ({ importer }) => (path.dirname(importer) === storageDir ? { path: path.join(storageDir, 'browser_platform.ts') } : undefined));
        build.onResolve({ filter: /^wgt:shaders$/ }, () => ({ path: 'shaders', namespace: 'wgt-shaders' }));
        build.onLoad({ filter: /.*/, namespace: 'wgt-shaders' }, () => ({ contents: shaderModule(root), loader: 'js' }));
      },
    }],
  });
  if (!result.success) throw new Error(`web: the page did not build:\n${result.logs.map(String).join('\n')}`);
  return result.outputs[0].text();
}
