// Acquiring a WebGPU device on Bun, Deno and Node.
//
// Deno (and browsers) expose `navigator.gpu`; Bun and Node get Dawn through the
// `webgpu` package. With Dawn we first ask for a core adapter on the default
// backends; machines without a GPU have none, so we then name the OpenGL backend and
// ask for a compatibility-level adapter, which is Mesa's llvmpipe software renderer
// (it needs EGL_PLATFORM=surfaceless, set here when absent). Deno's wgpu takes Mesa's
// llvmpipe or lavapipe as a core adapter instead; either way `caps.software` says a CPU
// renders. What the drivers print on stderr meanwhile is filtered (driver_log.ts).

import { ensureRuntimeDir, setDefaultEnv } from './driver_env.ts';
import { filterDriverLog, noAdapterAdvice } from './driver_log.ts';
import { GpuError } from './errors.ts';
import { detectRuntime, processEnv } from './host.ts';
import { captureNativeStderr } from './native_stderr.ts';

export type Backend = 'auto' | 'vulkan' | 'opengl' | 'opengles' | 'metal' | 'd3d12' | 'd3d11';

export interface GpuOptions {
  /** Dawn backend; `auto` tries the defaults, then OpenGL in compatibility mode. */
  backend?: Backend;
  /** Substring of the adapter's description, vendor or architecture to insist on. */
  adapter?: string;
  powerPreference?: GPUPowerPreference;
  /** Dawn toggles, e.g. `allow_unsafe_apis,vulkan_enable_f16_on_nvidia`. */
  toggles?: string[];
  /** Refuse the software fallback (for benchmarks that must run on hardware). */
  requireHardware?: boolean;
  /**
   * Whether Dawn clamps every array and buffer index in our shaders (its robustness
   * transform). `auto` turns the clamps off on hardware adapters and keeps them on the
   * software GPU; see robustnessToggles.
   */
  robustness?: Robustness;
  /**
   * `off` keeps a software renderer that came as a core adapter (Deno's wgpu, lavapipe)
   * on the hardware kernels: Deno's kernel tests use it so that naga compiles those.
   * By default it takes the software GPU's kernels (see GpuCapabilities.compatibility).
   */
  softwareKernels?: 'auto' | 'off';
}

const ROBUSTNESS = ['auto', 'on', 'off'] as const;
export type Robustness = (typeof ROBUSTNESS)[number];

/** Whether `value` names a robustness setting (auto, on, off). */
export const isRobustness = (value: string): value is Robustness => (ROBUSTNESS as readonly string[]).includes(value);

/** One subgroup matrix shape and type the adapter offers (GPUAdapterInfo.subgroupMatrixConfigs, Dawn). */
export interface SubgroupMatrixConfig {
  componentType: string;
  resultComponentType: string;
  M: number;
  N: number;
  K: number;
}

export interface GpuCapabilities {
  f16: boolean;
  subgroups: boolean;
  subgroupMatrix: boolean;
  /** What the adapter reports for subgroup matrices; empty without the feature. */
  subgroupMatrixConfigs: SubgroupMatrixConfig[];
  /**
   * 16x16x16 subgroup matrices with f16 inputs and f32 results, usable here (shader-f16
   * and subgroups enabled too): the tensor-core matmul (shaders/matmul/tensor.wgsl).
   */
  subgroupMatrixF16F32: boolean;
  timestampQuery: boolean;
  /**
   * The software GPU's path: a compatibility-level adapter (how Dawn reaches llvmpipe), or
   * any software renderer unless `softwareKernels` is off. The kernels' compatibility
   * variants are the ones built for llvmpipe (uniform-buffer windows, docs/DEVELOPING.md):
   * under Deno (wgpu, llvmpipe as a core adapter) they took the bundled model's
   * scaled-down iteration from 509 s to 23 s of rollout and from 31 s to 6 s of reference.
   */
  compatibility: boolean;
  /** A software renderer (llvmpipe, lavapipe, SwiftShader, WARP): a CPU does the work. */
  software: boolean;
  /** Dawn bounds-clamps shader array and buffer accesses (false under `disable_robustness`). */
  robustness: boolean;
  subgroupMinSize: number;
  subgroupMaxSize: number;
}

export interface Gpu {
  device: GPUDevice;
  adapter: GPUAdapter;
  runtime: 'deno' | 'bun' | 'node' | 'browser';
  description: string;
  caps: GpuCapabilities;
  limits: GPUSupportedLimits;
}

/** Reads options from the environment: WEBGPU_BACKEND, WEBGPU_ADAPTER, WEBGPU_TOGGLES, WEBGPU_ROBUSTNESS, WEBGPU_SOFTWARE_KERNELS, WEBGPU_POWER. */
export function gpuOptionsFromEnv(env: Record<string, string | undefined> = processEnv()): GpuOptions {
  const opts: GpuOptions = {};
  const backend = env.WEBGPU_BACKEND?.trim();
  if (backend) {
    const known: Backend[] = ['auto', 'vulkan', 'opengl', 'opengles', 'metal', 'd3d12', 'd3d11'];
    if (!known.includes(backend as Backend)) {
      throw new GpuError(`WEBGPU_BACKEND=${backend} is not one of ${known.join(', ')}`);
    }
    opts.backend = backend as Backend;
  }
  if (env.WEBGPU_ADAPTER?.trim()) opts.adapter = env.WEBGPU_ADAPTER.trim();
  const toggles = env.WEBGPU_TOGGLES ?? '';
  if (toggles.trim()) opts.toggles = toggles.split(',').map((t) => t.trim()).filter(Boolean);
  const robustness = env.WEBGPU_ROBUSTNESS?.trim();
  if (robustness) {
    if (!isRobustness(robustness)) throw new GpuError(`WEBGPU_ROBUSTNESS=${robustness} is not one of ${ROBUSTNESS.join(', ')}`);
    opts.robustness = robustness;
  }
  const softwareKernels = env.WEBGPU_SOFTWARE_KERNELS?.trim();
  if (softwareKernels) {
    if (softwareKernels !== 'auto' && softwareKernels !== 'off') throw new GpuError(`WEBGPU_SOFTWARE_KERNELS=${softwareKernels} is not one of auto, off`);
    opts.softwareKernels = softwareKernels;
  }
  const power = env.WEBGPU_POWER?.trim();
  if (power === 'low-power' || power === 'high-performance') opts.powerPreference = power;
  return opts;
}

interface DawnModule {
  create(flags: string[]): GPU;
  globals: Record<string, unknown>;
}

async function loadDawn(): Promise<DawnModule> {
  const mod = (await import('webgpu')) as unknown as DawnModule;
  // Dawn's classes (GPUBufferUsage, GPUMapMode ...) are what the WebGPU API expects as globals.
  for (const [k, v] of Object.entries(mod.globals)) {
    if (!(k in globalThis)) (globalThis as Record<string, unknown>)[k] = v;
  }
  return mod;
}

/** Software renderers by the names their adapters report. */
const SOFTWARE_RENDERER = /llvmpipe|lavapipe|softpipe|swiftshader|microsoft basic render|\bwarp\b/i;

/** Whether an adapter is a CPU renderer: flagged as the fallback adapter, or named as one of the known software renderers. */
export function isSoftwareAdapter(info: { vendor?: string; architecture?: string; device?: string; description?: string; isFallbackAdapter?: boolean }): boolean {
  return info.isFallbackAdapter === true || SOFTWARE_RENDERER.test([info.vendor, info.architecture, info.device, info.description].join(' '));
}

function describe(adapter: GPUAdapter): string {
  const info = adapter.info;
  return [info.vendor, info.architecture, info.device, info.description].filter((s) => s).join(' ') || 'unknown adapter';
}

function matches(adapter: GPUAdapter, want?: string): boolean {
  return !want || describe(adapter).toLowerCase().includes(want.toLowerCase());
}

const DISABLE_ROBUSTNESS = 'disable_robustness';

/**
 * The Dawn toggles for one adapter request. WebGPU's safety promise makes Dawn clamp
 * every dynamic index in a shader (workgroup arrays and subgroup-matrix loads included)
 * so that no access leaves its buffer; every kernel here checks its own bounds, and on
 * the H200 the clamps cost the tensor-core matmul half its speed (50 -> 91-122 TFLOP/s)
 * and the Qwen2.5-0.5B train step 40% (407 -> 245 ms, docs/RESULTS.md). So `auto` turns
 * them off on hardware adapters, as native WebGPU engines (ONNX Runtime's, Skia Graphite)
 * do, and keeps them on the software GPU, where the tests run. `on` keeps them for
 * debugging a kernel that may index out of bounds.
 */
export function robustnessToggles(toggles: readonly string[], robustness: Robustness, compatibility: boolean): string[] {
  const rest = toggles.filter((t) => t !== DISABLE_ROBUSTNESS);
  const off = robustness === 'off' || (robustness === 'auto' && (!compatibility || toggles.includes(DISABLE_ROBUSTNESS)));
  return off ? [...rest, DISABLE_ROBUSTNESS] : rest;
}

/** Whether Dawn keeps its clamps for an adapter at this level under these options. */
const clampsKept = (opts: GpuOptions, compatibility: boolean) =>
  !robustnessToggles(opts.toggles ?? [], opts.robustness ?? 'auto', compatibility).includes(DISABLE_ROBUSTNESS);

/** Dawn offered no adapter on the backend asked for; what to do depends on what the drivers said meanwhile. */
class NoAdapterError extends GpuError {
  constructor(message: string, readonly backend: Backend) {
    super(message);
  }
}

// Instances must outlive the devices they made; Dawn tears them down otherwise.
const liveInstances: GPU[] = [];

async function requestDawnAdapter(opts: GpuOptions): Promise<{ adapter: GPUAdapter; compatibility: boolean }> {
  const dawn = await loadDawn();
  const backend = opts.backend ?? 'auto';
  const tried: string[] = [];
  const attempt = async (flags: string[], featureLevel: 'core' | 'compatibility') => {
    const toggles = robustnessToggles(opts.toggles ?? [], opts.robustness ?? 'auto', featureLevel === 'compatibility');
    const gpu = dawn.create([...flags, ...(toggles.length ? [`enable-dawn-features=${toggles.join(',')}`] : [])]);
    liveInstances.push(gpu);
    const adapter = await gpu.requestAdapter({ featureLevel, powerPreference: opts.powerPreference } as GPURequestAdapterOptions);
    tried.push(`${flags.join(' ') || 'default backends'} (${featureLevel}): ${adapter ? describe(adapter) : 'none'}`);
    return adapter && matches(adapter, opts.adapter) ? adapter : null;
  };
  if (backend === 'auto') {
    const core = await attempt([], 'core');
    if (core) return { adapter: core, compatibility: false };
    if (!opts.requireHardware) {
      await setDefaultEnv('EGL_PLATFORM', 'surfaceless');
      const soft = await attempt(['backend=opengl'], 'compatibility');
      if (soft) return { adapter: soft, compatibility: true };
    }
  } else {
    if (backend === 'opengl' || backend === 'opengles') await setDefaultEnv('EGL_PLATFORM', 'surfaceless');
    const core = await attempt([`backend=${backend}`], 'core');
    if (core) return { adapter: core, compatibility: false };
    const compat = await attempt([`backend=${backend}`], 'compatibility');
    if (compat) return { adapter: compat, compatibility: true };
  }
  throw new NoAdapterError(`no WebGPU adapter found${opts.adapter ? ` matching "${opts.adapter}"` : ''}. Tried:\n  ${tried.join('\n  ')}`, backend);
}

async function requestNavigatorAdapter(opts: GpuOptions): Promise<{ adapter: GPUAdapter; compatibility: boolean }> {
  const gpu = (globalThis.navigator as Navigator & { gpu?: GPU }).gpu!;
  const core = await gpu.requestAdapter({ powerPreference: opts.powerPreference });
  if (core && matches(core, opts.adapter)) return { adapter: core, compatibility: false };
  const compat = await gpu.requestAdapter({ featureLevel: 'compatibility', powerPreference: opts.powerPreference } as GPURequestAdapterOptions);
  if (compat && matches(compat, opts.adapter)) return { adapter: compat, compatibility: true };
  const offered = [core, compat].filter((a): a is GPUAdapter => !!a).map(describe);
  throw new GpuError(`no WebGPU adapter found${opts.adapter ? ` matching "${opts.adapter}"` : ''} (navigator.gpu offered: ${offered.join('; ') || 'none'})`);
}

const wantedFeatures: GPUFeatureName[] = [
  'shader-f16',
  'subgroups',
  'timestamp-query',
  'chromium-experimental-subgroup-matrix' as GPUFeatureName,
];

// Limits worth raising to what the adapter really offers (the defaults are far lower).
const wantedLimits = [
  'maxStorageBufferBindingSize',
  'maxBufferSize',
  'maxStorageBuffersPerShaderStage',
  'maxComputeWorkgroupStorageSize',
  'maxComputeInvocationsPerWorkgroup',
  'maxComputeWorkgroupSizeX',
  'maxComputeWorkgroupSizeY',
  'maxComputeWorkgroupSizeZ',
  'maxComputeWorkgroupsPerDimension',
  'maxUniformBufferBindingSize',
] as const;

export async function acquireGpu(options: GpuOptions = {}): Promise<Gpu> {
  const opts = { ...gpuOptionsFromEnv(), ...options };
  await ensureRuntimeDir();
  const { result, text } = await captureNativeStderr(() => openDevice(opts));
  const { kept, dropped } = filterDriverLog(text);
  if (kept) process.stderr.write(kept);
  if (result.ok) return result.value;
  if (result.error instanceof NoAdapterError) result.error.message += `\n${noAdapterAdvice(result.error.backend, text)}`;
  // Without an adapter the harmless messages may be the explanation after all.
  if (result.error instanceof GpuError && dropped) result.error.message += `\nThe drivers said:\n${dropped.trimEnd()}`;
  throw result.error;
}

async function openDevice(opts: GpuOptions): Promise<Gpu> {
  const runtime = detectRuntime();
  const nav = (globalThis as { navigator?: Navigator & { gpu?: GPU } }).navigator;
  const useNavigator = !!nav?.gpu && runtime !== 'bun' && runtime !== 'node';
  const { adapter, compatibility } = useNavigator ? await requestNavigatorAdapter(opts) : await requestDawnAdapter(opts);
  // navigator.gpu takes no toggles: its implementation keeps its own bounds checks.
  const robustness = useNavigator || clampsKept(opts, compatibility);

  const requiredFeatures = wantedFeatures.filter((f) => adapter.features.has(f));
  const requiredLimits: Record<string, number> = {};
  for (const name of wantedLimits) {
    const v = (adapter.limits as unknown as Record<string, number>)[name];
    if (typeof v === 'number') requiredLimits[name] = v;
  }
  let device: GPUDevice;
  try {
    device = await adapter.requestDevice({ requiredFeatures, requiredLimits, label: 'trainer' });
  } catch (e) {
    throw new GpuError(`requestDevice failed on ${describe(adapter)}: ${(e as Error).message}`);
  }
  const info = adapter.info as GPUAdapterInfo & { subgroupMinSize?: number; subgroupMaxSize?: number; subgroupMatrixConfigs?: readonly SubgroupMatrixConfig[] };
  const subgroupMatrix = device.features.has('chromium-experimental-subgroup-matrix' as GPUFeatureName);
  // Copied into plain objects: Dawn's are getters that JSON.stringify would show as {}.
  const subgroupMatrixConfigs = subgroupMatrix
    ? (info.subgroupMatrixConfigs ?? []).map((c) => ({ componentType: c.componentType, resultComponentType: c.resultComponentType, M: c.M, N: c.N, K: c.K }))
    : [];
  const f16 = device.features.has('shader-f16');
  const software = isSoftwareAdapter(info);
  const subgroups = device.features.has('subgroups');
  const caps: GpuCapabilities = {
    f16,
    subgroups,
    subgroupMatrix,
    subgroupMatrixConfigs,
    subgroupMatrixF16F32: f16 && subgroups && subgroupMatrixConfigs.some((c) => c.componentType === 'f16' && c.resultComponentType === 'f32' && c.M === 16 && c.N === 16 && c.K === 16),
    timestampQuery: device.features.has('timestamp-query'),
    compatibility: compatibility || (software && opts.softwareKernels !== 'off'),
    software,
    robustness,
    subgroupMinSize: info.subgroupMinSize ?? 0,
    subgroupMaxSize: info.subgroupMaxSize ?? 0,
  };
  return { device, adapter, runtime, description: describe(adapter) + (compatibility ? ' (compatibility)' : ''), caps, limits: snapshotLimits(device.limits) };
}

/**
 * A plain copy of a device's limits, which never change: every property read of the
 * native object is a call into the binding, and launchers read limits on each
 * dispatch (decoding records a few hundred a step).
 */
function snapshotLimits(limits: GPUSupportedLimits): GPUSupportedLimits {
  const copy: Record<string, number> = {};
  // Bindings differ in whether the limits are enumerable: take the prototype's names too.
  const names = new Set(Object.getOwnPropertyNames(Object.getPrototypeOf(limits)));
  for (const name in limits) names.add(name);
  for (const name of names) {
    const value = (limits as unknown as Record<string, unknown>)[name];
    if (typeof value === 'number') copy[name] = value;
  }
  return copy as unknown as GPUSupportedLimits;
}
