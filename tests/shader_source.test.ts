// The shader include step (src/gpu/shader_source.ts): nested includes, each file once
// per shader, errors that name the missing file and the line that asked for it, and
// every shader in shaders/ expanding.

import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, describe, test } from 'node:test';
import { expandShader, shaderSource } from '../src/gpu/shader_source.ts';

const root = mkdtempSync(join(tmpdir(), 'shaders-'));
after(() => rmSync(root, { recursive: true, force: true }));

function write(files: Record<string, string>): void {
  for (const [name, text] of Object.entries(files)) {
    mkdirSync(dirname(join(root, name)), { recursive: true });
    writeFileSync(join(root, name), text);
  }
}

describe('shader includes', () => {
  test('an include is replaced by the file, whose own includes are expanded in turn', () => {
    write({
      'outer.wgsl': 'fn top() {}\n// #include "common/middle.wgsl"\nfn bottom() {}',
      'common/middle.wgsl': '  //   #include   "common/inner.wgsl"  \nfn middle() {}',
      'common/inner.wgsl': 'const INNER = 1u;',
    });
    const text = expandShader(root, 'outer');
    assert.equal(text.code, 'fn top() {}\nconst INNER = 1u;\nfn middle() {}\nfn bottom() {}');
    assert.deepEqual([1, 2, 3, 4].map(text.origin), ['outer.wgsl:1', 'common/inner.wgsl:1', 'common/middle.wgsl:2', 'outer.wgsl:3']);
  });

  test('a file is included once per shader, however many files ask for it, the shader itself included', () => {
    write({
      'twice.wgsl': '// #include "common/a.wgsl"\n// #include "common/b.wgsl"\n// #include "common/a.wgsl"\nfn main() {}',
      'common/a.wgsl': '// #include "common/shared.wgsl"\nfn a() {}',
      'common/b.wgsl': '// #include "common/shared.wgsl"\n// #include "twice.wgsl"\nfn b() {}',
      'common/shared.wgsl': 'struct Shared { x: u32 }',
    });
    assert.equal(expandShader(root, 'twice').code, 'struct Shared { x: u32 }\nfn a() {}\nfn b() {}\nfn main() {}');
  });

  test('a missing file is named with the file and line that included it; so is a path outside shaders/', () => {
    write({
      'broken.wgsl': 'fn f() {}\n// #include "common/ok.wgsl"',
      'common/ok.wgsl': '\n\n// #include "common/nope.wgsl"',
      'escape.wgsl': '// #include "../outside.wgsl"',
      'notwgsl.wgsl': '// #include "common/ok.txt"',
    });
    assert.throws(() => expandShader(root, 'broken'), (e: Error) => e.message.startsWith('common/ok.wgsl:3: #include "common/nope.wgsl": no file ') && e.message.endsWith(join(root, 'common/nope.wgsl')));
    assert.throws(() => expandShader(root, 'escape'), /escape.wgsl:1: #include "..\/outside.wgsl" must name a .wgsl file inside shaders\//);
    assert.throws(() => expandShader(root, 'notwgsl'), /notwgsl.wgsl:1: #include "common\/ok.txt" must name a .wgsl file inside shaders\//);
    assert.throws(() => expandShader(root, 'absent'), /no shader file .*absent.wgsl for kernel family "absent"/);
  });

  test('every shader in shaders/ expands, with no include left and no file twice', () => {
    const shaders = join(dirname(fileURLToPath(import.meta.url)), '..', 'shaders');
    const families: string[] = [];
    const walk = (dir: string) => {
      for (const name of readdirSync(dir)) {
        const path = join(dir, name);
        if (statSync(path).isDirectory()) walk(path);
        else if (name.endsWith('.wgsl') && !relative(shaders, path).startsWith('common')) families.push(relative(shaders, path).slice(0, -5));
      }
    };
    walk(shaders);
    assert.ok(families.includes('matmul/tiled') && families.includes('delta_rule_backward'), families.join(', '));
    for (const family of families) {
      const code = shaderSource(family);
      assert.doesNotMatch(code, /#include/, family);
      // A struct or override declared twice would not compile.
      const declared = [...code.matchAll(/^(?:struct|override)\s+(\w+)/gm)].map((m) => m[1]);
      assert.equal(new Set(declared).size, declared.length, `${family}: ${declared.join(', ')}`);
    }
  });
});
