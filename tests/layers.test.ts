// The source tree's layers (docs/DEVELOPING.md): every import under src/ (and of the
// top-level envs/ files that src/ reaches) points to the same layer or a lower one,
// and no files import each other in a circle. Type-only imports count: a lower layer
// that names a higher layer's type depends on it all the same.
//
// Layers, highest first. bench/ sits just under cli/, which runs it; it may use every
// layer below, and the CPU references. The top-level envs/ servers and adapters share
// the envs layer with src/envs/ (the protocol they implement). net/ (HTTP helpers for
// the env and rollout servers) and reference/ (CPU references of the kernels) are
// leaves: net imports nothing from src/, reference only tensor's shape, dtype and
// error definitions, and only tests and bench import reference. memory/ (the GPU
// memory plan), scoring/ (log-probs and greedy decoding on any CausalLM) and lora/
// (adapters and their PEFT files) sit just above models/ and hf_model/, whose models
// and configs they take, and below the engines and runs that use them. hf_model/ (a
// Hugging Face model directory: config.json as a ModelConfig, the checkpoint's
// tensors, presets) sits just under models/, which builds its models from those
// configs and checkpoints.
// hub/ (Hub ids into the Hugging Face cache, pushes) sits under both, so that
// whatever loads a model may resolve a Hub id; tokenizer/ and safetensors/ sit under
// both too, and both read and write weights through safetensors/. device/ (acquiring
// the adapter and device, the native drivers' environment and stderr, GpuError) sits
// under gpu/, the runtime built on the device, and imports no layer. util/ (the seeded
// generators, atomic file writes, f16 and bf16 bits) sits above storage/ (files, paths
// and the process, per platform: the local file system or a browser's), the bottom
// layer, which every other may use.

import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve, sep } from 'node:path';
import { describe, test } from 'node:test';
import { filesUnder, REPO_ROOT as root } from './support/repo_files.ts';

/** Layers that may import node:* — the edges where I/O meets a platform: files, paths and the process (storage/), sockets (net/), the native GPU driver's process (device/) — and those above the trainer, which only Bun, Deno and Node run. */
const NODE_EDGES = ['storage', 'net', 'device'];
const ABOVE_TRAINER = ['cli', 'bench', 'compare'];

const LAYERS = ['cli', 'bench', 'compare', 'web', 'trainer', 'sft', 'run', 'eval', 'checkpoint', 'config', 'report', 'algos', 'serve', 'fleet', 'rollout', 'engines', 'envs', 'memory', 'scoring', 'lora', 'models', 'hf_model', 'tokenizer', 'safetensors', 'hub', 'nn', 'optim', 'tensor', 'kernels', 'gpu', 'device', 'net', 'util', 'storage'];
/** What reference/ may import besides itself. */
const REFERENCE_MAY_IMPORT = ['src/tensor/shape.ts', 'src/tensor/dtype.ts', 'src/tensor/errors.ts'];


// Import and export-from statements at the start of a line (multi-line braces
// included), side-effect imports, and dynamic imports of a string.
const STATIC = /^(?:import|export)\s+(?:type\s+)?(?:\*(?:\s+as\s+\w+)?|\{[^}]*\}|\w+(?:\s*,\s*(?:\{[^}]*\}|\*\s+as\s+\w+))?)\s+from\s+['"]([^'"]+)['"]/gm;
const SIDE_EFFECT = /^import\s+['"]([^'"]+)['"]/gm;
const DYNAMIC = /\bimport\(\s*['"]([^'"]+)['"]\s*\)/g;

function specifiersOf(file: string): string[] {
  const text = readFileSync(join(root, file), 'utf8');
  return [STATIC, SIDE_EFFECT, DYNAMIC].flatMap((re) => [...text.matchAll(re)].map((m) => m[1]));
}

/** Relative imports of `file` (a path from the repository root), resolved to paths from the root. */
function importsOf(file: string): string[] {
  return specifiersOf(file).filter((s) => s.startsWith('.')).map((s) => relative(root, resolve(root, dirname(file), s)).split(sep).join('/'));
}

/** src/ and the top-level envs/ files it reaches, with their imports. */
function importGraph(): Map<string, string[]> {
  const graph = new Map<string, string[]>();
  const queue = filesUnder('src');
  while (queue.length) {
    const file = queue.pop()!;
    if (graph.has(file)) continue;
    const targets = importsOf(file);
    graph.set(file, targets);
    for (const t of targets) {
      if (t.startsWith('envs/') && !graph.has(t)) queue.push(t);
    }
  }
  return graph;
}

/** The layer of a file under src/ or envs/. */
function layerOf(file: string): string {
  if (file.startsWith('envs/')) return 'envs';
  return file.split('/')[1];
}

const edge = (a: string, b: string) => `${a} -> ${b}`;

/** Strongly connected components of more than one file (Tarjan), each as its files. */
function circles(graph: Map<string, string[]>): string[][] {
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const found: string[][] = [];
  let next = 0;
  const visit = (v: string) => {
    index.set(v, next);
    low.set(v, next++);
    stack.push(v);
    onStack.add(v);
    for (const w of graph.get(v) ?? []) {
      if (!graph.has(w)) continue;
      if (!index.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v)!, low.get(w)!));
      } else if (onStack.has(w)) {
        low.set(v, Math.min(low.get(v)!, index.get(w)!));
      }
    }
    if (low.get(v) === index.get(v)) {
      const component: string[] = [];
      let w: string;
      do {
        w = stack.pop()!;
        onStack.delete(w);
        component.push(w);
      } while (w !== v);
      if (component.length > 1 || (graph.get(v) ?? []).includes(v)) found.push(component.sort());
    }
  };
  for (const v of [...graph.keys()].sort()) if (!index.has(v)) visit(v);
  return found;
}

/** A shortest circle through the first file of a strongly connected `component`, as `a -> b -> ... -> a`. */
function shortestCycle(graph: Map<string, string[]>, component: string[]): string {
  const start = component[0];
  const from = new Map<string, string>();
  const queue = [start];
  while (queue.length) {
    const v = queue.shift()!;
    for (const w of graph.get(v) ?? []) {
      if (!component.includes(w) || from.has(w)) continue;
      from.set(w, v);
      if (w === start) {
        const between: string[] = [];
        for (let at = v; at !== start; at = from.get(at)!) between.unshift(at);
        return [start, ...between, start].join(' -> ');
      }
      queue.push(w);
    }
  }
  return component.join(', ');
}

describe('layers', () => {
  const graph = importGraph();

  test('every import resolves to a file', () => {
    const missing = [...graph].flatMap(([a, targets]) => targets.filter((b) => !existsSync(join(root, b))).map((b) => edge(a, b)));
    assert.deepEqual(missing, []);
  });

  test('imports point to the same layer or a lower one; reference/ and net/ are leaves', () => {
    const wrong: string[] = [];
    for (const [a, targets] of graph) {
      const la = layerOf(a);
      for (const b of targets) {
        const lb = b.startsWith('src/') || b.startsWith('envs/') ? layerOf(b) : null;
        const why = (reason: string) => wrong.push(`${edge(a, b)}: ${reason}`);
        if (lb === null) {
          why('imports from outside src/ and envs/');
          continue;
        }
        if (la === 'reference') {
          if (lb !== 'reference' && !REFERENCE_MAY_IMPORT.includes(b)) why(`reference/ imports only itself and ${REFERENCE_MAY_IMPORT.join(', ')}`);
          continue;
        }
        if (lb === 'reference') {
          if (la !== 'bench') why('only tests and bench import reference/');
          continue;
        }
        for (const l of [la, lb]) if (!LAYERS.includes(l)) why(`src/${l}/ is not in the layer order (LAYERS in tests/layers.test.ts)`);
        if (LAYERS.indexOf(la) > LAYERS.indexOf(lb)) why(`${la} is below ${lb}`);
      }
    }
    assert.deepEqual(wrong, []);
  });

  test('from the trainer down, only the edges (storage/, net/, device/) import node:*, so every other layer runs in a browser too', () => {
    const wrong = [...graph.keys()]
      .filter((f) => !ABOVE_TRAINER.includes(layerOf(f)) && !NODE_EDGES.includes(layerOf(f)))
      .flatMap((f) => specifiersOf(f).filter((s) => s.startsWith('node:')).map((s) => `${f} imports ${s}`));
    assert.deepEqual(wrong, []);
  });

  test('no files import each other in a circle', () => {
    assert.deepEqual(circles(graph).map((files) => shortestCycle(graph, files)), []);
  });

  test('the parser sees every kind of import this tree uses', () => {
    // A file with each form, as text: the rules above are only as good as the parse.
    const forms = importsOf('src/cli/bench.ts').length + importsOf('src/tensor/ops/index.ts').length;
    assert.ok(forms > 10);
    assert.ok(importsOf('src/tensor/ops/matmul.ts').includes('src/kernels/matmul/args.ts'), 'import type { ... }');
    assert.ok(importsOf('src/tensor/ops/index.ts').includes('src/tensor/ops/elementwise.ts'), 'export * from');
    assert.ok(importsOf('tests/support/gpu.ts').includes('src/tensor/ops/index.ts'), "side-effect import '...'");
  });
});
