// storage/: the local file system's Storage and the browser's (in memory here: no
// OPFS outside a browser) behave alike on every call the trainer makes, and the
// browser's POSIX paths agree with node:path's.

import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as nodePath from 'node:path';
import { describe, test } from 'node:test';
import { BrowserStorage } from '../src/storage/browser_storage.ts';
import { NodeStorage } from '../src/storage/node_storage.ts';
import { posixPaths } from '../src/storage/posix_paths.ts';
import type { Storage } from '../src/storage/types.ts';
import { tarArchive } from '../src/web/tar.ts';

const bytes = (s: string) => new TextEncoder().encode(s);

function suite(name: string, make: () => { fs: Storage; root: string }) {
  describe(name, () => {
    test('whole files: write atomically, read back, stat, list, append lines', () => {
      const { fs: s, root } = make();
      const f = `${root}/a/b/c.txt`;
      s.writeAtomic(f, 'one');
      assert.equal(s.readText(f), 'one');
      assert.deepEqual([...s.readBytes(f)], [...bytes('one')]);
      assert.deepEqual({ size: s.stat(f)!.size, dir: s.stat(f)!.isDirectory }, { size: 3, dir: false });
      assert.equal(s.stat(`${root}/a`)!.isDirectory, true);
      assert.equal(s.stat(`${root}/nothing`), null);
      s.appendLines(`${root}/a/log.jsonl`, ['{"x":1}']);
      s.appendLines(`${root}/a/log.jsonl`, ['{"x":2}', '{"x":3}']);
      assert.equal(s.readText(`${root}/a/log.jsonl`), '{"x":1}\n{"x":2}\n{"x":3}\n');
      assert.deepEqual(s.list(`${root}/a`).sort(), ['b', 'log.jsonl']);
      assert.throws(() => s.readText(`${root}/missing`), (e: NodeJS.ErrnoException) => e.code === 'ENOENT');
      assert.throws(() => s.list(`${root}/missing`), (e: NodeJS.ErrnoException) => e.code === 'ENOENT');
      assert.equal(s.realPath(`${root}/a/../a/b/c.txt`), s.realPath(f));
    });

    test('handles: positional writes with a truncate, reads by ranges, appends', () => {
      const { fs: s, root } = make();
      s.makeDir(root);
      const w = s.openWrite(`${root}/data.bin`);
      w.write(bytes('head'), 0);
      w.truncate(10);
      w.write(bytes('XY'), 6);
      w.close();
      const r = s.openRead(`${root}/data.bin`);
      assert.equal(r.size, 10);
      const into = new Uint8Array(4);
      assert.equal(r.read(into, 6), 4);
      assert.deepEqual([...into], [...bytes('XY'), 0, 0]);
      assert.equal(r.read(new Uint8Array(4), 10), 0);
      r.close();
      const a = s.openAppend(`${root}/sub/events`);
      a.append('ab');
      a.append(bytes('cd'));
      a.close();
      assert.equal(s.readText(`${root}/sub/events`), 'abcd');
    });

    test('exclusive creation, renames of files and folders, links, removal', () => {
      const { fs: s, root } = make();
      s.makeDir(`${root}/tmp-ckpt/model`);
      assert.equal(s.createExclusive(`${root}/run.lock`, 'me'), true);
      assert.equal(s.createExclusive(`${root}/run.lock`, 'you'), false);
      assert.equal(s.readText(`${root}/run.lock`), 'me');
      s.writeAtomic(`${root}/tmp-ckpt/model/w`, 'weights');
      s.writeAtomic(`${root}/tmp-ckpt/state`, 'state');
      s.rename(`${root}/tmp-ckpt`, `${root}/ckpt-1`);
      assert.equal(s.exists(`${root}/tmp-ckpt`), false);
      assert.equal(s.readText(`${root}/ckpt-1/model/w`), 'weights');
      assert.deepEqual(s.list(`${root}/ckpt-1`).sort(), ['model', 'state']);
      s.writeAtomic(`${root}/latest.tmp`, 'ckpt-1');
      s.rename(`${root}/latest.tmp`, `${root}/latest`);
      assert.equal(s.readText(`${root}/latest`), 'ckpt-1');
      s.link('ckpt-1/state', `${root}/pointer`);
      assert.equal(s.readText(`${root}/pointer`), 'state');
      s.remove(`${root}/ckpt-1`);
      s.remove(`${root}/never-there`);
      assert.equal(s.exists(`${root}/ckpt-1/model/w`), false);
      assert.deepEqual(s.list(root).sort(), ['latest', 'pointer', 'run.lock']);
    });
  });
}

suite('NodeStorage', () => ({ fs: new NodeStorage(), root: fs.mkdtempSync(nodePath.join(os.tmpdir(), 'wgt-storage-')) }));
suite('BrowserStorage (memory)', () => ({ fs: new BrowserStorage(), root: '/runs/r' }));

test('BrowserStorage: provided files read like fetched ones, and filesUnder lists a run for its download', () => {
  const s = new BrowserStorage();
  s.provide({ 'shaders/common/matmul_params.wgsl': 'struct P {}' });
  assert.equal(s.readText('/shaders/common/matmul_params.wgsl'), 'struct P {}');
  assert.deepEqual(s.list('shaders'), ['common']);
  s.writeAtomic('runs/r/metrics.jsonl', '{}\n');
  s.writeAtomic('runs/r/checkpoints/ckpt-1/model/config.json', '{}');
  assert.deepEqual(s.filesUnder('runs/r').map((f) => f.path), ['/runs/r/checkpoints/ckpt-1/model/config.json', '/runs/r/metrics.jsonl']);
});

test("posixPaths agrees with node:path's POSIX functions (the working directory at the root)", () => {
  const paths = ['', '.', '/', 'a', 'a/', '/a/b/', 'a/./b/../c', '../a', '/../a', 'a/../..', 'runs/x/ckpt-2', '/runs//x/', 'x.tar.gz', '.bashrc', 'a/b.c/d', '..'];
  for (const p of paths) {
    for (const f of ['normalize', 'dirname', 'basename', 'extname', 'isAbsolute'] as const) assert.equal(posixPaths[f](p), nodePath.posix[f](p), `${f}(${JSON.stringify(p)})`);
    assert.equal(posixPaths.resolve(p), nodePath.posix.resolve('/', p), `resolve(${JSON.stringify(p)})`);
  }
  for (const [a, b] of [['a', 'b'], ['/a', 'b'], ['a/', '../c'], ['', 'x'], ['runs', 'x']]) assert.equal(posixPaths.join(a, b), nodePath.posix.join(a, b));
  for (const [a, b] of [['/a/b/c', '/a/d'], ['/a', '/a'], ['/a', '/a/b/c'], ['/x/y', '/']]) assert.equal(posixPaths.relative(a, b), nodePath.posix.relative(a, b));
  assert.equal(posixPaths.basename('/m/model.safetensors', '.safetensors'), 'model');
});

test('tarArchive: an archive tar extracts, long paths included', () => {
  const dir = fs.mkdtempSync(nodePath.join(os.tmpdir(), 'wgt-tar-'));
  const long = `run/${'d'.repeat(90)}/checkpoints/ckpt-2/model/model.safetensors`;
  const archive = tarArchive([{ path: 'run/metrics.jsonl', data: bytes('{"iteration":1}\n') }, { path: long, data: new Uint8Array(1000).fill(7) }]);
  assert.equal(archive.length % 512, 0);
  fs.writeFileSync(nodePath.join(dir, 'run.tar'), archive);
  execFileSync('tar', ['-xf', 'run.tar'], { cwd: dir });
  assert.equal(fs.readFileSync(nodePath.join(dir, 'run/metrics.jsonl'), 'utf8'), '{"iteration":1}\n');
  assert.deepEqual([...fs.readFileSync(nodePath.join(dir, long))], [...new Uint8Array(1000).fill(7)]);
});
