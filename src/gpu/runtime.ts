// The dispatch queue every kernel goes through.
//
// Dispatches are recorded into one command encoder (one compute pass) and submitted
// at sync points: a readback, an explicit flush, or every `autoFlush` dispatches, after
// a ramp of smaller submits whenever the GPU has run dry.
// Each kernel's shape parameters go into a 256-byte slot of a uniform arena that is
// written once per submit (arena.ts), so changing sizes never compiles a new pipeline;
// small uploads recorded between submits go through another such arena. Bind groups
// are reused when a kernel meets the same slot and buffers again, as loops do.
// Validation errors are captured with an error scope around each batch and thrown at
// the next sync point with the labels (kernel names) Dawn puts in its messages.
// Syncs and readbacks wait for the GPU through paced_wait.ts, which keeps a long wait
// from spinning the event loop. The runtime also holds the kernel choices launchers
// read (policy, kernel_policy.ts) and those measured on this device (autotune.ts).

import { Arena } from './arena.ts';
import { Autotune } from './autotune.ts';
import { BufferPool } from './buffer_pool.ts';
import { acquireGpu, type Gpu, type GpuOptions } from '../device/device.ts';
import { DeviceLostError, GpuError } from '../device/errors.ts';
import { kernelPolicy, type KernelPolicy, type KernelPolicyChanges } from './kernel_policy.ts';
import { KeyTrie } from './key_trie.ts';
import { pacedWait } from './paced_wait.ts';
import { KernelProfiler, type KernelTime } from './profiler.ts';
import { shaderText } from './shader_source.ts';

const UNIFORM_SLOT = 256;
const UNIFORM_CHUNK = 256 * UNIFORM_SLOT;
/**
 * Uploads recorded between submits of up to this many bytes go through an arena like
 * the kernels' parameters, larger ones through a staging buffer of their own; readbacks
 * up to this size reuse their mappable buffers. A decode step uploads its sampling
 * settings and reads its tokens back: a buffer created and destroyed for each cost
 * about 6% of the step's host time on the H200.
 */
const SMALL_TRANSFER = 64 * 1024;
/** Mappable readback buffers kept for reuse. */
const READBACKS_KEPT = 4;
/** Bind groups kept for reuse; past this many the cache starts over. */
const BIND_GROUP_CACHE = 8192;

export interface Kernel {
  readonly name: string;
  readonly pipeline: GPUComputePipeline;
  readonly layout: GPUBindGroupLayout;
}

export type Binding = GPUBuffer | { buffer: GPUBuffer; offset?: number; size?: number };

export type WorkgroupCount = readonly [number, number?, number?];

/** The adapter to acquire and the kernel policy's changes from its defaults. */
export interface RuntimeOptions extends GpuOptions {
  policy?: KernelPolicyChanges;
}

export class Runtime {
  readonly device: GPUDevice;
  readonly pool: BufferPool;
  /** Dispatches recorded since the runtime started (benchmarks read this). */
  dispatchCount = 0;
  submitCount = 0;
  /** Readbacks (each a wait for the GPU) since the runtime started. */
  readCount = 0;
  /** Bind groups created (cache misses of bindGroup), the largest host cost of a dispatch. */
  bindGroupCount = 0;
  /** Copies recorded (staged uploads included): each ends the compute pass. */
  copyCount = 0;
  /** Kernel choices measured on this device (policy values `autotune`); run when the GPU runs dry. */
  readonly autotune = new Autotune();
  // Measured on the H200 (Qwen2.5-0.5B shapes, 128 sampled tokens): submitting every
  // 64 dispatches let the GPU start while the host records the rest of a step, batch 1
  // decoding 61 -> 98 tokens/s and batch 32 1,526 -> 2,776; every 16 was slower again.
  autoFlush = 64;
  /**
   * Dispatches in the first submit after the GPU has run dry (a sync or a readback);
   * each submit after it takes twice as many, up to `autoFlush`. With a whole batch of
   * `autoFlush` first, the GPU waited while the host recorded all of it: H200, 2048^3
   * products timed back to back from a sync, 41.8-43.7 TFLOP/s against 45.6-46.6 with
   * the ramp; the train step and decoding the same within their noise.
   */
  firstFlush = 4;
  /** Submits since the GPU last ran dry (counted to 30, past any autoFlush): the ramp's step. */
  private rampStep = 0;

  /** Kernels by family, entry point, then each override constant's name and value in order. */
  private kernels = new KeyTrie<Kernel>();
  private encoder: GPUCommandEncoder | null = null;
  private pass: GPUComputePassEncoder | null = null;
  private pending = 0;
  private batchLabels = new Set<string>();
  private params: Arena;
  private uploads: Arena;
  private readbacks: GPUBuffer[] = [];
  private stagingToDestroy: GPUBuffer[] = [];
  private errorChecks: Promise<void>[] = [];
  private lost: GPUDeviceLostInfo | null = null;
  private uncaptured: string[] = [];
  private destroyed = false;
  private bindGroups = new KeyTrie<GPUBindGroup>();
  private bindGroupsCached = 0;
  private profiler: KernelProfiler | null = null;
  private passPipeline: GPUComputePipeline | null = null;

  /**
   * @param policy the kernel choices of this runtime (gpu/kernel_policy.ts); launchers
   *   read it at every call, so changes take effect from the next dispatch.
   */
  constructor(readonly gpu: Gpu, readonly policy: KernelPolicy = kernelPolicy()) {
    this.device = gpu.device;
    this.pool = new BufferPool(this.device, gpu.limits.maxBufferSize, gpu.limits.maxStorageBufferBindingSize, {
      flush: () => {
        this.flush();
        return this.submitCount;
      },
    });
    this.params = new Arena(this.device, UNIFORM_CHUNK, GPUBufferUsage.UNIFORM, 'kernel params');
    this.uploads = new Arena(this.device, SMALL_TRANSFER, GPUBufferUsage.COPY_SRC, 'upload arena');
    this.device.lost.then((info) => {
      this.lost = info;
    });
    this.device.addEventListener('uncapturederror', (ev) => {
      this.uncaptured.push((ev as GPUUncapturedErrorEvent).error.message);
    });
  }

  get caps() {
    return this.gpu.caps;
  }

  private checkAlive(): void {
    if (this.destroyed) throw new DeviceLostError('the GPU runtime was destroyed');
    if (this.lost) throw new DeviceLostError(`GPU device lost (${this.lost.reason}): ${this.lost.message}`);
  }

  /** A compiled kernel: entry point `entry` of shaders/<family>.wgsl with override constants. */
  kernel(family: string, entry: string, constants?: Record<string, number>): Kernel {
    // Launchers ask for their kernel at every dispatch: a string key (JSON.stringify of
    // the constants) took about 0.4 us a call in a decode step (Bun). A constant's name
    // is a string and its value a number, so no two lists of constants share a path.
    let node = this.kernels.at(family).at(entry);
    for (const c in constants) node = node.at(c).at(constants[c]);
    if (node.value) return node.value;
    this.checkAlive();
    const name = constants && Object.keys(constants).length
      ? `${family}.${entry}<${Object.entries(constants).map(([a, b]) => `${a}=${b}`).join(',')}>`
      : `${family}.${entry}`;
    this.device.pushErrorScope('validation');
    const text = shaderText(family);
    const module = this.device.createShaderModule({ code: text.code, label: family });
    const pipeline = this.device.createComputePipeline({
      label: name,
      layout: 'auto',
      compute: { module, entryPoint: entry, constants },
    });
    this.deferError(
      this.device.popErrorScope().then(async (err) => {
        if (!err) return;
        const info = await module.getCompilationInfo().catch(() => null);
        const detail = info?.messages.filter((m) => m.type === 'error').map((m) => `  ${text.origin(m.lineNum)}:${m.linePos} ${m.message}`).join('\n');
        throw new GpuError(`kernel ${name} failed to compile: ${err.message}${detail ? `\n${detail}` : ''}`);
      }),
    );
    node.value = { name, pipeline, layout: pipeline.getBindGroupLayout(0) };
    return node.value;
  }

  private beginBatch(): GPUCommandEncoder {
    if (!this.encoder) {
      this.checkAlive();
      this.device.pushErrorScope('out-of-memory');
      this.device.pushErrorScope('validation');
      this.encoder = this.device.createCommandEncoder();
    }
    return this.encoder;
  }

  private computePass(): GPUComputePassEncoder {
    if (!this.pass) this.pass = this.beginBatch().beginComputePass();
    return this.pass;
  }

  private endPass(): void {
    this.pass?.end();
    this.pass = null;
    this.passPipeline = null;
  }

  private uniformSlot(params: Uint32Array): { buffer: GPUBuffer; offset: number } {
    if (params.byteLength > UNIFORM_SLOT) throw new GpuError(`kernel parameters of ${params.byteLength} bytes exceed ${UNIFORM_SLOT}`);
    return this.params.write(params, UNIFORM_SLOT);
  }

  /**
   * The bind group of one dispatch, reused when the same kernel layout meets the same
   * uniform slot and buffer ranges again. createBindGroup is most of a dispatch's host
   * cost, and a decode or update loop repeats its kernels on the same pooled buffers
   * and slots step after step. The key (a KeyTrie path, no string built per dispatch:
   * one of object ids was the largest JavaScript cost of a dispatch in a decode step's
   * CPU profile) is the layout, the slot's buffer and offset, then per binding its
   * buffer, followed by its offset and size (-1: the rest) when it is a range, or null
   * where it is skipped. A buffer is an object, so a range's numbers never read as the
   * next binding, and no two binding lists share a path. A destroyed buffer's entries
   * can only go unused until the cache is cleared.
   */
  private bindGroup(kernel: Kernel, slot: { buffer: GPUBuffer; offset: number }, buffers: readonly (Binding | null)[]): GPUBindGroup {
    let node = this.bindGroupNode(kernel, slot, buffers);
    if (node.value) return node.value;
    if (this.bindGroupsCached >= BIND_GROUP_CACHE) {
      this.clearBindGroups();
      node = this.bindGroupNode(kernel, slot, buffers);
    }
    const entries: GPUBindGroupEntry[] = [{ binding: 0, resource: { buffer: slot.buffer, offset: slot.offset, size: UNIFORM_SLOT } }];
    buffers.forEach((b, i) => {
      if (b !== null) entries.push({ binding: i + 1, resource: 'buffer' in b ? b : { buffer: b } });
    });
    node.value = this.device.createBindGroup({ layout: kernel.layout, entries, label: kernel.name });
    this.bindGroupCount++;
    this.bindGroupsCached++;
    return node.value;
  }

  /** The cache's node of these bindings (see bindGroup), made where missing. */
  private bindGroupNode(kernel: Kernel, slot: { buffer: GPUBuffer; offset: number }, buffers: readonly (Binding | null)[]): KeyTrie<GPUBindGroup> {
    let node = this.bindGroups.at(kernel.layout).at(slot.buffer).at(slot.offset);
    for (const b of buffers) {
      node = b === null || !('buffer' in b) ? node.at(b) : node.at(b.buffer).at(b.offset ?? 0).at(b.size ?? -1);
    }
    return node;
  }

  private clearBindGroups(): void {
    this.bindGroups = new KeyTrie();
    this.bindGroupsCached = 0;
  }

  /**
   * Records one dispatch. Binding 0 is the kernel's uniform parameters, bindings 1..n
   * are `buffers` in order; null skips a binding the entry point does not use.
   */
  dispatch(kernel: Kernel, buffers: readonly (Binding | null)[], params: Uint32Array, workgroups: WorkgroupCount): void {
    const [x, y = 1, z = 1] = workgroups;
    if (x === 0 || y === 0 || z === 0) return;
    const maxDim = this.gpu.limits.maxComputeWorkgroupsPerDimension;
    if (x > maxDim || y > maxDim || z > maxDim) {
      throw new GpuError(`kernel ${kernel.name}: workgroup grid [${x}, ${y}, ${z}] exceeds ${maxDim} per dimension`);
    }
    if (this.profiler) {
      if (this.profiler.full) this.flush();
      this.endPass();
      this.pass = this.beginBatch().beginComputePass(this.profiler.passFor(kernel.name));
    }
    const pass = this.computePass();
    const slot = this.uniformSlot(params);
    // A pass keeps its pipeline across dispatches, so repeats of a kernel skip the call.
    if (this.passPipeline !== kernel.pipeline) {
      pass.setPipeline(kernel.pipeline);
      this.passPipeline = kernel.pipeline;
    }
    pass.setBindGroup(0, this.bindGroup(kernel, slot, buffers));
    pass.dispatchWorkgroups(x, y, z);
    if (this.profiler) this.endPass();
    this.batchLabels.add(kernel.name);
    this.dispatchCount++;
    if (++this.pending >= Math.min(this.firstFlush * 2 ** this.rampStep, this.autoFlush)) this.flush();
  }

  /** Copies between buffers in queue order with the recorded dispatches. */
  copy(src: GPUBuffer, srcOffset: number, dst: GPUBuffer, dstOffset: number, bytes: number): void {
    if (bytes === 0) return;
    this.copyCount++;
    this.endPass();
    this.beginBatch().copyBufferToBuffer(src, srcOffset, dst, dstOffset, bytes);
    this.pending++;
  }

  /** Zeroes `bytes` of `dst` in queue order. */
  clear(dst: GPUBuffer, offset: number, bytes: number): void {
    if (bytes === 0) return;
    this.endPass();
    this.beginBatch().clearBuffer(dst, offset, bytes);
    this.pending++;
  }

  /** Writes CPU data into a buffer, ordered after everything recorded so far. */
  upload(dst: GPUBuffer, dstOffset: number, data: ArrayBufferView): void {
    this.checkAlive();
    if (data.byteLength === 0) return;
    if (!this.encoder) {
      this.device.queue.writeBuffer(dst, dstOffset, data.buffer, data.byteOffset, data.byteLength);
      return;
    }
    // Pending commands may still read `dst` (a pooled buffer released and reused), and
    // queue.writeBuffer would overtake them; go through a staging copy in order instead:
    // a slice of the upload arena (written at the submit, before the copy runs) or, for
    // large data, a buffer of its own.
    const size = Math.ceil(data.byteLength / 4) * 4;
    if (size <= SMALL_TRANSFER) {
      // The copy's whole words end in zeros, as a fresh staging buffer's would.
      const space = this.uploads.take(size);
      space.cpu.set(new Uint8Array(data.buffer, data.byteOffset, data.byteLength));
      space.cpu.fill(0, data.byteLength);
      this.copy(space.buffer, space.offset, dst, dstOffset, size);
      return;
    }
    const staging = this.device.createBuffer({ size, usage: GPUBufferUsage.COPY_SRC, mappedAtCreation: true, label: 'upload staging' });
    new Uint8Array(staging.getMappedRange()).set(new Uint8Array(data.buffer, data.byteOffset, data.byteLength));
    staging.unmap();
    this.copy(staging, 0, dst, dstOffset, size);
    this.stagingToDestroy.push(staging);
  }

  /** Submits everything recorded. Errors surface at the next `sync`/`read`. */
  flush(): void {
    if (!this.encoder) return;
    this.endPass();
    this.params.writeAll();
    this.uploads.writeAll();
    this.profiler?.resolve(this.encoder);
    this.device.queue.submit([this.encoder.finish()]);
    this.submitCount++;
    this.encoder = null;
    this.pending = 0;
    this.rampStep = Math.min(this.rampStep + 1, 30);
    const labels = [...this.batchLabels];
    this.batchLabels.clear();
    const scopes = [this.device.popErrorScope(), this.device.popErrorScope()];
    this.deferError(
      Promise.all(scopes).then(([validation, oom]) => {
        // An allocation that ran out of memory leaves an invalid buffer whose use then
        // fails validation: the out-of-memory error is the cause, so it leads.
        if (oom) {
          throw new GpuError(`GPU out-of-memory error in a batch with kernels [${labels.join(', ')}]: ${oom.message}${validation ? `\n(then: ${validation.message})` : ''}`);
        }
        if (validation) throw new GpuError(`GPU validation error in a batch with kernels [${labels.join(', ')}]: ${validation.message}`);
      }),
    );
    if (this.stagingToDestroy.length) {
      const done = this.stagingToDestroy;
      this.stagingToDestroy = [];
      this.device.queue.onSubmittedWorkDone().then(() => done.forEach((b) => b.destroy()));
    }
  }

  // Errors are thrown at the next sync point, not where they were found; marking the
  // promise handled keeps the runtime from reporting it as an unhandled rejection.
  private deferError(check: Promise<void>): void {
    check.catch(() => {});
    this.errorChecks.push(check);
  }

  /**
   * Waits for the GPU to finish everything submitted and throws any error it reported;
   * then runs queued autotune measurements (this.autotune).
   */
  async sync(): Promise<void> {
    this.flush();
    const submits = this.submitCount;
    await pacedWait(this.device.queue.onSubmittedWorkDone(), this.policy.pacing);
    this.pool.reclaimed(submits);
    this.rampStep = 0;
    await this.checkErrors();
    if (this.autotune.pending) await this.autotune.runQueued();
  }

  /** Throws the errors of `checks` (default: every submission so far) and any uncaptured error. */
  private async checkErrors(checks: Promise<void>[] = this.errorChecks.splice(0)): Promise<void> {
    await Promise.all(checks);
    if (this.uncaptured.length) {
      const msgs = this.uncaptured.splice(0);
      throw new GpuError(`GPU error: ${msgs.join('\n')}`);
    }
    this.checkAlive();
  }

  /** Reads `bytes` from `src` at `offset` back to the CPU (then runs queued autotune measurements). */
  async read(src: GPUBuffer, offset: number, bytes: number): Promise<ArrayBuffer> {
    this.checkAlive();
    this.readCount++;
    if (bytes === 0) {
      await this.checkErrors();
      return new ArrayBuffer(0);
    }
    const size = Math.ceil(bytes / 4) * 4;
    const small = size <= SMALL_TRANSFER;
    const kept = small ? this.readbacks.pop() : undefined;
    const staging = kept ?? this.device.createBuffer({ size: small ? SMALL_TRANSFER : size, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST, label: 'readback' });
    this.copy(src, offset, staging, 0, size);
    this.flush();
    // Only the submissions up to this copy: a decoding loop records and submits its next
    // step before awaiting this read, and must not wait on that step's checks here.
    const checks = this.errorChecks.splice(0);
    const submits = this.submitCount;
    try {
      await pacedWait(staging.mapAsync(GPUMapMode.READ, 0, size), this.policy.pacing);
    } catch (e) {
      await this.checkErrors(checks);
      throw new GpuError(`readback failed: ${(e as Error).message}`);
    }
    this.pool.reclaimed(submits);
    // Nothing submitted while waiting: the copy was the GPU's last work.
    if (this.submitCount === submits) this.rampStep = 0;
    await this.checkErrors(checks);
    const out = staging.getMappedRange(0, size).slice(0, bytes);
    staging.unmap();
    if (small && this.readbacks.length < READBACKS_KEPT) this.readbacks.push(staging);
    else staging.destroy();
    if (this.autotune.pending) await this.autotune.runQueued();
    return out;
  }

  /**
   * Starts timing every dispatch on the GPU (timestamp queries; see profiler.ts), from
   * the next dispatch on. Throws when the adapter has no timestamp queries.
   */
  startProfiling(): void {
    if (this.profiler) return;
    this.flush();
    this.profiler = new KernelProfiler(this.device, this.caps.timestampQuery);
  }

  /** GPU time per kernel since startProfiling, slowest first. */
  async profile(): Promise<KernelTime[]> {
    if (!this.profiler) throw new GpuError('no profile: call startProfiling() first');
    await this.sync();
    return this.profiler.collect();
  }

  /**
   * While profiling, files the GPU time of the dispatches since the last section under
   * `label` (a training iteration's phases call this as each ends); does nothing otherwise.
   */
  async closeProfileSection(label: string): Promise<void> {
    if (!this.profiler) return;
    await this.sync();
    await this.profiler.collect(label);
  }

  /** GPU time per kernel of each section closed since startProfiling, and of what came after the last as `other`. */
  async profileSections(): Promise<Map<string, KernelTime[]>> {
    if (!this.profiler) throw new GpuError('no profile: call startProfiling() first');
    await this.sync();
    await this.profiler.collect('other');
    return this.profiler.sectionTimes();
  }

  /** Stops timing dispatches and drops the profiler. */
  async stopProfiling(): Promise<void> {
    if (!this.profiler) return;
    await this.sync();
    await this.profiler.collect();
    this.profiler.destroy();
    this.profiler = null;
  }

  /**
   * Waits for the GPU when buffers the pool destroyed may still hold its memory, so that
   * memory is back before more is allocated (Dawn frees a destroyed buffer only once
   * the GPU is done with it and the process has waited on the GPU since). A loop that
   * records much work between readbacks (an update's micro-batches) calls it between
   * steps; a trim under the budget's pressure is then never stacked onto the next step.
   */
  async settle(): Promise<void> {
    if (this.pool.stats.unreclaimed > 0) await this.sync();
  }

  /**
   * Returns the pool's cached free buffers to the driver. Phases of a training step
   * (sampling, scoring, the update) leave differently sized buffers behind; trimming
   * between them keeps a process's footprint at one phase's, which matters when
   * several runs share a GPU.
   */
  releaseCached(): void {
    this.flush();
    this.clearBindGroups();
    this.pool.trim();
  }

  destroy(): void {
    if (this.destroyed) return;
    this.destroyed = true;
    this.pool.trim();
    this.device.destroy();
  }
}

let current: Runtime | null = null;
let starting: Promise<Runtime> | null = null;

/** Starts (once) and returns the process-wide runtime. */
export function initRuntime(options: RuntimeOptions = {}): Promise<Runtime> {
  if (current) return Promise.resolve(current);
  // Checked before the adapter is acquired, so a bad policy fails fast.
  const policy = kernelPolicy(options.policy);
  starting ??= acquireGpu(options).then((gpu) => (current = new Runtime(gpu, policy)));
  return starting;
}

/** The runtime started by `initRuntime`, or null before it (checks made before the GPU starts). */
export function currentRuntime(): Runtime | null {
  return current;
}

/** The runtime started by `initRuntime`; throws when there is none yet. */
export function runtime(): Runtime {
  if (!current) throw new GpuError('no GPU runtime: call initRuntime() first');
  return current;
}

export function destroyRuntime(): void {
  current?.destroy();
  current = null;
  starting = null;
}
