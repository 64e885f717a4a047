// Every file of the repository that the README, docs/ and the sources' comments name
// by its path exists: a file moved or renamed takes its mentions along.

import assert from 'node:assert/strict';
import { readdirSync, readFileSync, existsSync, statSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { test } from 'node:test';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');

/** Paths written as examples of what a user would create, not files of the repository. */
const EXAMPLES = new Set(['envs/guess/plugin.ts', 'tests/x.test.ts']);

const NAMED = /(?<![\w./-])((?:src|shaders|tests|dev|docs|envs|examples)\/[\w./-]*\.(?:ts|wgsl|md|yaml))/g;

function files(dir: string, ext: RegExp): string[] {
  return readdirSync(join(root, dir)).flatMap((name) => {
    const rel = join(dir, name);
    if (statSync(join(root, rel)).isDirectory()) return files(rel, ext);
    return ext.test(name) ? [rel] : [];
  });
}

test('the files named in the README, docs/ and the sources exist', () => {
  const readers = ['README.md', ...files('docs', /\.md$/), ...files('src', /\.ts$/), ...files('shaders', /\.wgsl$/), ...files('tests', /\.ts$/), ...files('envs', /\.ts$/), ...files('dev', /\.ts$/), ...files('examples', /\.yaml$/)];
  const missing: string[] = [];
  for (const reader of readers) {
    for (const [, path] of readFileSync(join(root, reader), 'utf8').matchAll(NAMED)) {
      if (!EXAMPLES.has(path) && !existsSync(join(root, path))) missing.push(`${reader} names ${path}`);
    }
  }
  assert.ok(readers.length > 100, 'the scan read the tree');
  assert.deepEqual(missing, []);
});
