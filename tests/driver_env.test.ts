// What the device layer does around the drivers: which of their stderr messages are
// dropped as harmless, what finding no adapter is put down to (from those messages),
// the private XDG_RUNTIME_DIR, and telling software renderers from GPUs by what their
// adapters report.

import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { after, describe, test } from 'node:test';
import { runCli } from './support/cli_process.ts';
import { gpuOptionsFromEnv, isSoftwareAdapter } from '../src/device/device.ts';
import { privateRuntimeDir, runtimeDirProblem } from '../src/device/driver_env.ts';
import { filterDriverLog, noAdapterAdvice } from '../src/device/driver_log.ts';

// As Dawn 0.6.2 (the webgpu package) and Mesa 22.3 print them.
const NO_VULKAN =
  "Warning: Couldn't load Vulkan: libvulkan.so.1: cannot open shared object file: No such file or directory\n" +
  '    at operator() (/home/runner/work/node-webgpu/node-webgpu/third_party/dawn/src/dawn/native/vulkan/BackendVk.cpp:368)\n\n';
const OLD_LAVAPIPE =
  'Warning: Vulkan shaderUniform*ArrayDynamicIndexing required.\n' +
  ' - While initializing adapter (backend=BackendType::Vulkan)\n' +
  '    at InitializeImpl (/home/runner/work/node-webgpu/node-webgpu/third_party/dawn/src/dawn/native/vulkan/PhysicalDeviceVk.cpp:257)\n\n';
const GL_LIMITS =
  'Warning: maxDynamicUniformBuffersPerPipelineLayout artificially reduced from 90 to 16 to fit dynamic offset allocation limit.\n' +
  'Warning: maxDynamicStorageBuffersPerPipelineLayout artificially reduced from 80 to 16 to fit dynamic offset allocation limit.\n';
const XDG = 'error: XDG_RUNTIME_DIR is invalid or not set in the environment.\n';

describe('driver log filter', () => {
  test('drops the known harmless messages whole, with their context and location lines', () => {
    const text = XDG + XDG + OLD_LAVAPIPE + NO_VULKAN + GL_LIMITS;
    assert.deepEqual(filterDriverLog(text), { kept: '', dropped: text });
    assert.deepEqual(filterDriverLog(''), { kept: '', dropped: '' });
  });

  test('keeps anything else, in order, with its own context lines', () => {
    const real =
      'Warning: Shader compilation took 3 seconds.\n' +
      ' - While calling [Device].CreateComputePipeline([ComputePipelineDescriptor "matmul"]).\n' +
      '    at Compile (/home/runner/work/node-webgpu/Foo.cpp:12)\n\n';
    const crash = 'libEGL warning: DRI3: failed to authenticate\nSegmentation fault\n';
    const { kept, dropped } = filterDriverLog(GL_LIMITS + real + XDG + crash + NO_VULKAN);
    assert.equal(kept, real + crash);
    assert.equal(dropped, GL_LIMITS + XDG + NO_VULKAN);
  });

  test('a rule matches the first line exactly: a different number or wording is kept', () => {
    const other = 'Warning: maxDynamicUniformBuffersPerPipelineLayout artificially reduced from 90 to 16 because of something else.\n';
    assert.equal(filterDriverLog(other).kept, other);
    const tail = 'Warning: Vulkan shaderUniform*ArrayDynamicIndexing required. Also: something broke.\n';
    assert.equal(filterDriverLog(tail).kept, tail);
    // A text without a final newline comes back with one.
    assert.equal(filterDriverLog('error: out of memory').kept, 'error: out of memory\n');
  });
});

describe('no adapter', () => {
  test('asked for Vulkan: a lavapipe Dawn refuses is named as the cause, not a missing Mesa; no loader names the loader', () => {
    const refused = noAdapterAdvice('vulkan', XDG + OLD_LAVAPIPE + OLD_LAVAPIPE);
    assert.match(refused, /Dawn found a Vulkan driver it cannot use: the driver lacks shaderUniform\*ArrayDynamicIndexing/);
    assert.match(refused, /Leave the backend to auto/);
    assert.doesNotMatch(refused, /install Mesa/);
    assert.match(noAdapterAdvice('vulkan', NO_VULKAN), /no Vulkan loader \(libvulkan\.so\.1\): install libvulkan1/);
    // Auto tried OpenGL too: Mesa's OpenGL packages are what is missing.
    assert.match(noAdapterAdvice('auto', NO_VULKAN + OLD_LAVAPIPE), /install Mesa \(mesa-vulkan-drivers libegl1 libegl-mesa0 libgl1-mesa-dri\)/);
  });

  test('gpu --backend vulkan says why this machine has no Vulkan adapter, from what its drivers said', { timeout: 120_000 }, async () => {
    const r = await runCli(['gpu', '--backend', 'vulkan']);
    if (r.code === 0) return; // a machine with a Vulkan adapter has nothing to explain
    assert.match(r.out, /no WebGPU adapter found\. Tried:\n {2}backend=vulkan \(core\): none/);
    const said = r.out.slice(r.out.indexOf('The drivers said:'));
    assert.equal(r.out.match(/\n(Dawn found a Vulkan driver|There is no Vulkan loader|On a machine without a GPU)[^\n]*/)![0].trim(), noAdapterAdvice('vulkan', said));
  });
});

describe('XDG_RUNTIME_DIR', () => {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'wgt-xdg-test-'));
  after(() => fs.rmSync(root, { recursive: true, force: true }));

  test('unset, relative, missing or a file is a problem; a directory of ours is not', () => {
    assert.equal(runtimeDirProblem(undefined), 'not set');
    assert.equal(runtimeDirProblem(''), 'not set');
    assert.match(runtimeDirProblem('run/user/0')!, /not an absolute path/);
    assert.match(runtimeDirProblem(path.join(root, 'missing'))!, /does not exist/);
    const file = path.join(root, 'file');
    fs.writeFileSync(file, '');
    assert.match(runtimeDirProblem(file)!, /not a directory/);
    assert.equal(runtimeDirProblem(root), null);
  });

  test('the private directory is made 0700 and reused; a name taken with other permissions is left alone', () => {
    const dir = privateRuntimeDir(root);
    assert.equal(fs.statSync(dir).mode & 0o777, 0o700);
    assert.equal(privateRuntimeDir(root), dir);
    assert.equal(runtimeDirProblem(dir), null);
    fs.chmodSync(dir, 0o755);
    const other = privateRuntimeDir(root);
    assert.notEqual(other, dir);
    assert.equal(fs.statSync(other).mode & 0o777, 0o700);
  });
});

describe('software adapters', () => {
  test('llvmpipe through Dawn and through wgpu, lavapipe and SwiftShader are software; GPUs are not', () => {
    assert.ok(isSoftwareAdapter({ description: 'llvmpipe-llvm-15-0-6-256-bits- OpenGL version 4.5 (Core Profile) Mesa 22.3.6' }));
    assert.ok(isSoftwareAdapter({ vendor: '65541', device: '0', description: 'llvmpipe (LLVM 15.0.6, 256 bits)' }));
    assert.ok(isSoftwareAdapter({ vendor: 'mesa', architecture: '', description: 'lavapipe' }));
    assert.ok(isSoftwareAdapter({ vendor: 'google', description: 'SwiftShader Device (Subzero)' }));
    assert.ok(isSoftwareAdapter({ description: 'some renderer', isFallbackAdapter: true }));
    assert.ok(!isSoftwareAdapter({ vendor: 'nvidia', architecture: 'hopper', description: 'NVIDIA H200' }));
    assert.ok(!isSoftwareAdapter({ vendor: 'apple', architecture: 'metal-3', description: 'Apple M2 Max', isFallbackAdapter: false }));
    assert.ok(!isSoftwareAdapter({ vendor: 'intel', description: 'Intel(R) Arc(tm) A770 Graphics (DG2) warpspeed' }));
  });

  test('WEBGPU_SOFTWARE_KERNELS=off keeps a software core adapter on the hardware kernels; other values are refused', () => {
    assert.equal(gpuOptionsFromEnv({ WEBGPU_SOFTWARE_KERNELS: 'off' }).softwareKernels, 'off');
    assert.equal(gpuOptionsFromEnv({}).softwareKernels, undefined);
    assert.throws(() => gpuOptionsFromEnv({ WEBGPU_SOFTWARE_KERNELS: 'core' }), /WEBGPU_SOFTWARE_KERNELS=core is not one of auto, off/);
  });
});
