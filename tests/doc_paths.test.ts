// Every file of the repository that the README, docs/ and the sources' comments name
// by its path exists: a file moved or renamed takes its mentions along.

import assert from 'node:assert/strict';
import { readFileSync, existsSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { filesUnder, REPO_ROOT as root } from './support/repo_files.ts';

/** Paths written as examples of what a user would create, not files of the repository. */
const EXAMPLES = new Set(['envs/guess/plugin.ts', 'tests/x.test.ts']);

const NAMED = /(?<![\w./-])((?:src|shaders|tests|dev|docs|envs|examples)\/[\w./-]*\.(?:ts|wgsl|md|yaml))/g;

test('the files named in the README, docs/ and the sources exist', () => {
  const readers = ['README.md', ...filesUnder('docs', /\.md$/), ...filesUnder('src'), ...filesUnder('shaders', /\.wgsl$/), ...filesUnder('tests'), ...filesUnder('envs'), ...filesUnder('dev'), ...filesUnder('examples', /\.yaml$/)];
  const missing: string[] = [];
  for (const reader of readers) {
    for (const [, path] of readFileSync(join(root, reader), 'utf8').matchAll(NAMED)) {
      if (!EXAMPLES.has(path) && !existsSync(join(root, path))) missing.push(`${reader} names ${path}`);
    }
  }
  assert.ok(readers.length > 100, 'the scan read the tree');
  assert.deepEqual(missing, []);
});
