// `export --out DIR` writes only where it loses nothing: a new or empty folder, or one an
// earlier export wrote. A folder holding anything else is refused unless --overwrite is
// given, and the source, a folder above it, or the working directory are refused even
// then. Nothing a refused export names is touched.

import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { after, describe, test } from 'node:test';
import { MAIN, ROOT } from './support/cli_process.ts';

const MODEL = path.join(ROOT, 'models', 'household-micro');
const slow = { timeout: 300_000 };

const exportCli = (args: string[], cwd = ROOT) => {
  const r = spawnSync(process.execPath, [MAIN, 'export', ...args], { cwd, encoding: 'utf8', timeout: 240_000 });
  return { code: r.status, out: r.stdout, err: r.stderr };
};

/** Every file under `dir` with its contents, to show a refused export changed nothing. */
function snapshot(dir: string): Record<string, string> {
  const files: Record<string, string> = {};
  for (const e of fs.readdirSync(dir, { recursive: true, withFileTypes: true })) {
    if (e.isFile()) files[path.relative(dir, path.join(e.parentPath, e.name))] = fs.readFileSync(path.join(e.parentPath, e.name), 'base64');
  }
  return files;
}

describe('export --out', () => {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'wgt-export-out-'));
  after(() => fs.rmSync(root, { recursive: true, force: true }));

  test('a folder holding files export did not write is refused, and kept; --overwrite replaces it', slow, () => {
    const out = path.join(root, 'important');
    fs.mkdirSync(path.join(out, 'sub'), { recursive: true });
    fs.writeFileSync(path.join(out, 'notes.txt'), 'mine\n');
    fs.writeFileSync(path.join(out, 'sub', 'more.txt'), 'also mine\n');
    const before = snapshot(out);
    const refused = exportCli([MODEL, '--out', out]);
    assert.equal(refused.code, 1);
    assert.match(refused.err, /--out .*important: holds files an export did not write \(notes\.txt, sub\); choose an empty or new folder, or pass --overwrite to replace it/);
    assert.deepEqual(snapshot(out), before);

    const forced = exportCli([MODEL, '--out', out, '--overwrite']);
    assert.equal(forced.code, 0, forced.err);
    assert.ok(fs.existsSync(path.join(out, 'model.safetensors')));
    assert.ok(!fs.existsSync(path.join(out, 'notes.txt')));
  });

  test('an earlier export is replaced without asking; a new folder is made', slow, () => {
    const out = path.join(root, 'new', 'model');
    const first = exportCli([MODEL, '--out', out]);
    assert.equal(first.code, 0, first.err);
    const again = exportCli([MODEL, '--out', out, '--dtype', 'bf16']);
    assert.equal(again.code, 0, again.err);
    assert.match(again.out, /a Hugging Face model in bf16/);
    assert.equal(JSON.parse(fs.readFileSync(path.join(out, 'config.json'), 'utf8')).torch_dtype, 'bfloat16');
    // A file put there since is not the export's to delete.
    fs.writeFileSync(path.join(out, 'notes.txt'), 'added later\n');
    const added = exportCli([MODEL, '--out', out]);
    assert.equal(added.code, 1);
    assert.match(added.err, /holds files an export did not write \(notes\.txt\)/);
    assert.equal(fs.readFileSync(path.join(out, 'notes.txt'), 'utf8'), 'added later\n');
  });

  test('the source, a folder above it and the working directory are refused even with --overwrite', slow, () => {
    const source = path.join(root, 'source');
    fs.cpSync(MODEL, source, { recursive: true });
    const before = snapshot(source);
    for (const [out, why] of [[source, 'is the model exported'], [root, 'holds the model exported']] as const) {
      const r = exportCli([source, '--out', out, '--overwrite']);
      assert.equal(r.code, 1, out);
      assert.match(r.err, new RegExp(`--out ${out.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}: ${why}`));
    }
    const work = path.join(root, 'work');
    fs.mkdirSync(work);
    fs.writeFileSync(path.join(work, 'README.md'), 'a project\n');
    const here = exportCli([source, '--out', '.', '--overwrite'], work);
    assert.equal(here.code, 1);
    assert.match(here.err, /--out \.: is the working directory/);
    assert.deepEqual(snapshot(source), before);
    assert.deepEqual(fs.readdirSync(work), ['README.md']);
  });
});
