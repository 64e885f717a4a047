// The kernel choices one runtime makes (rt.policy): which matmul tile and cut of k, when
// products go to tensor cores, which attention kernels, when reductions and decode
// steps take their other forms, and how waits for the GPU pace the event loop. One
// object per Runtime, set from the command line (src/cli/gpu_args.ts) and changed by
// benchmarks and tests on the runtime they hold; the launchers read it at each call.
// The defaults are what measured fastest on the H200 (docs/RESULTS.md); WebGPU does
// not say how many multiprocessors a device has, so the figures fitted to it are
// guesses elsewhere, where `matmul.tiles: 'autotune'` measures the tiles instead.

import { GpuError } from '../device/errors.ts';

/** A matmul's operand layout, A then B (n: as stored, t: transposed). */
export type MatmulLayoutName = 'nn' | 'nt' | 'tn' | 'tt';

/**
 * `tiled`: the flash kernels with tiles in workgroup memory (real GPUs). `blocked`: the
 * same tiles with a block of scores and outputs per invocation (head dims that are
 * multiples of 64). `uniform`: the software GPU's kernels, which read keys and values
 * (queries and dO in the dK/dV pass) from 64 KiB uniform-buffer windows; see
 * shaders/attention.wgsl.
 */
export type AttentionPath = 'tiled' | 'blocked' | 'uniform';

/** The f32 matmul launcher's choices (kernels/matmul/select.ts). */
export interface MatmulPolicy {
  /** Rows of A up to which a real GPU takes the skinny path (0: never). */
  skinnyMaxRows: number;
  /**
   * The same for products of at most narrowMaxColumns columns. On the H200 (bench
   * decode-matmul) 64 rows still ran 2-9x faster on the skinny path than on the tiles
   * for the Qwen2.5-0.5B projections (mlp down 83 us against 774), but the LM head
   * (151,936 columns) took 2.0 ms against the 128x128 tile's 1.2.
   */
  skinnyMaxRowsNarrow: number;
  narrowMaxColumns: number;
  /**
   * Layouts (A then B, n: as stored, t: transposed) whose plain outputs (plainOutput) on
   * the 128x256 tile run `main_origins` rather than `main`. H200, f32 lab at 4096^3: the
   * plain layout ran 44.7 TFLOP/s there against 39.6 on `main`'s 128x128; B transposed
   * ran 35.0 there against 42.7 in `main`, A transposed 40.0 against 41.4 (see the
   * shader). On 128x128 the plain layout ran faster in `main` (40.0 against 37.7), and
   * `main_origins` never cuts k, so every other tile takes `main`.
   */
  originLayouts: MatmulLayoutName[];
  /**
   * Layouts whose plain outputs take the 128x256 tile when its grid has at least
   * wideMinWorkgroups workgroups. Not B transposed since its tiles' k-rows are skewed
   * rather than XOR-swizzled (shaders/matmul/tiled.wgsl): H200, 2026-12-02, lab, two passes,
   * TFLOP/s on 128x128/t16 against 128x256: the MLP's up projection 4096 x 4,864 x 896
   * whole 43.5, 43.5 against 40.9, 41.6 (43.5, 42.7 streamed), an LM-head vocabulary
   * chunk 4096 x 30,464 x 896 47.4, 47.3 against 45.9, 45.7. Smaller grids of the
   * plain layout go to `main`, cut along k where splitRuns says (H200, 2026-12-01,
   * whole on `main_origins` -> in runs on `main`: 2048 x 896 x 30,464 27.2 ->
   * 34.5-38.9, 1024 x 896 x 30,464 14.2 -> 34.3, 2048 x 896 x 4,864 26.8 -> 32.0-34.7,
   * 1024^3 17.1 -> 30.4); at 128 workgroups the wide tile whole still leads (the MLP's
   * dX, 4096 x 896 x 4,864: 37.2 against 35.2 in 8 runs).
   */
  wideLayouts: MatmulLayoutName[];
  wideMinWorkgroups: number;
  /**
   * `rules`: the tile the fields above choose. `autotune`: every tile that fits the
   * device and computes a product is timed once per class of product on this GPU and
   * the fastest kept on the runtime (kernels/matmul/autotune.ts); until its class is
   * measured a product runs on the rules' tile. Products with forced runs, shares or
   * panel depth keep the rules' tile.
   */
  tiles: 'rules' | 'autotune';
}

/** When products run on the tensor-core kernel (kernels/matmul/precision.ts; `--tensor-cores`). */
export interface TensorCorePolicy {
  /** Route forward products to tensor cores when the device has them. */
  enabled: boolean;
  /** Route gradient products there too (scaled), when `enabled`. */
  gradients: boolean;
  /** Smallest product (m * n * k * batch multiply-adds) worth the tensor-core kernel. */
  minMacs: number;
  /** Row counts up to this take the f32 skinny path (decode steps) whatever the size... */
  maxSkinnyRows: number;
  /**
   * ...except products wider than matmul.narrowMaxColumns (an LM head), which take
   * tensor cores from this many rows: at 32 rows the Qwen2.5-0.5B LM head (151,936
   * columns) took 0.73 ms there on the H200 against 1.03 ms on the skinny path and
   * 1.17 on the 128x128 f32 tile (bench decode-matmul, 2026-12-01).
   */
  wideMinRows: number;

}

/** When the f32 kernel cuts k into runs and the tensor-core kernel into batched chunks (kernels/matmul/split_k.ts). */
export interface SplitKPolicy {
  /**
   * The f32 kernel cuts k into this many runs (more for outputs too small to reach
   * targetWorkgroups, fewer where a run would be shorter than minChunk). H200, k = 4096
   * (bench/lab, 2026-12-01): the MLP's dW (266 tiles of 128x128) ran 25.2 TFLOP/s whole,
   * 34.9 in 4 runs, 36.2-36.6 in 8-12 (the batched form in 4 chunks: 30.0); the
   * LM head's dW per 8,192-row vocabulary chunk 35.1 whole, 38.1 in 8. The MLP's
   * forward down projection (k = 4,864, B stored [N, K]) 35.0 whole, 37.4 in 8.
   */
  runs: number;
  /**
   * Outputs of this many 128x128 tiles or more stay whole on the f32 kernel: about four
   * per multiprocessor of an H200 (132), where the last round's idle share is small and
   * shorter runs only add partial sums (4096^3 in 8 runs: 39.6 against 43.8 whole on
   * the wide tile).
   */
  maxTiles: number;
  /**
   * Workgroups (tiles times runs) the f32 kernel's runs aim for on tiny outputs (the
   * bundled model's four tiles take 64 runs): eight per multiprocessor of an H200.
   * WebGPU does not say how many multiprocessors a device has; on a smaller GPU the
   * extra runs only add partial sums, a small fraction of the product's traffic.
   */
  targetWorkgroups: number;
  /**
   * The same for products on the tensor-core kernel, where the H200's Qwen2.5-0.5B
   * training step took 241 ms at 1024 and 233 at 256.
   */
  tensorTargetWorkgroups: number;
  /** Fewest k per run or chunk, so each workgroup still streams a long run of k. */
  minChunk: number;
  maxChunks: number;
}

/** When the f32 kernel streams its last round of tiles (stream-K, kernels/matmul/split_k.ts). */
export interface StreamKPolicy {
  /**
   * Multiprocessors the GPU runs workgroups on: the H200's 132. WebGPU does not say how
   * many a device has; elsewhere the shares only run in more rounds, each still even.
   */
  multiprocessors: number;
  /**
   * Outputs whose whole tiles would leave less than this share of the GPU's time idle
   * (in the last round of workgroups) stay whole. H200, f32 (lab, 2026-12-01): 4096^3
   * on the wide tile, 3.9 rounds, 47.6 TFLOP/s whole against 46.6 streamed; an 8,192-row
   * LM-head chunk's forward, 7.8 rounds, 43.3 against 42.3; the MLP's up projection,
   * 4.6 rounds, 40.7 against 42.4.
   */
  minIdle: number;
  /** Fewest K slices per share, so a share's partial tile is not most of its traffic. */
  minShareSlices: number;
  /**
   * What streaming costs beyond the work itself (a second dispatch, each share's start
   * and partial tiles, the sum), in K slices of one workgroup's time per workgroup
   * resident on a multiprocessor: outputs stream only where their shares end the last
   * round at least this much sooner than whole tiles would. Fitted to the H200 (lab,
   * 2026-12-02, TFLOP/s whole against streamed, three passes): the MLP's up projection
   * on 128x128/t16, two per multiprocessor, 1,216 tiles of 56 slices, shares of 34, 42.5 /
   * 42.8 / 42.3 against 41.9 / 41.9 / 41.2; the same product with B as stored on the
   * 128x256 tile, one per multiprocessor, 608 tiles, shares of 34 again, 42.1 / 43.5
   * against 44.3 / 44.8; an LM-head dW chunk on 128x128/t16, shares of 80
   * where whole tiles take 256, 44.2 / 44.2 / 44.1 against 48.0 / 47.8 / 47.5.
   */
  shareCostSlices: number;
}

/** Which attention kernels run (kernels/attention.ts; `--attention`). */
export interface AttentionPolicy {
  /**
   * The path every attention call takes unless its launch names one. `auto`: uniform
   * on the software GPU where the head dim allows; elsewhere blocked where its tiles
   * fit, else tiled. On the H200 blocked took 0.54x tiled's time for forward and
   * backward at the bundled model's shapes and 0.61x at Qwen2.5-0.5B's
   * (docs/RESULTS.md).
   */
  path: 'auto' | AttentionPath;
  /**
   * Forwards that record no gradient and are not training forwards (scoring, the
   * teacher's and reference's log-probs, prefill) on tensor cores (kernels/attention_tensor.ts) where the
   * device has f16 subgroup matrices and tensorCores.enabled; decode steps keep the path
   * above, and taped and training forwards take tensorTrainingForward's rule (below).
   * On the H200 (commit 6555842) it took 0.73x blocked's
   * time at the bundled model's shape (1.87 against 2.54 ms, 16 x 2,048, 4 heads over
   * 2) and 0.89x at Qwen2.5-0.5B's (0.43 against 0.48 ms, 8 x 512, 14 over 2); the
   * teacher pass, which spends 43-48% of its GPU time in attention, 0.93x whole and
   * 0.97x with its shared skills blocks (docs/PERFORMANCE.md section 5).
   */
  tensorForward: boolean;
  /**
   * Forwards with fewer score entries (batch x query heads x query rows x keys) keep
   * the f32 kernels: the smallest shape measured faster on tensor cores is
   * Qwen2.5-0.5B's above (29M), and at small sizes both take about a launch.
   */
  tensorForwardMinScores: number;
  /**
   * Backwards of taped forwards on tensor cores (kernels/attention_tensor_backward.ts)
   * where the device has f16 subgroup matrices, tensorCores.enabled and .gradients, and
   * the head dim is a multiple of 16 up to 64: q, k, v, dO (scaled by a power of two),
   * P and dS rounded to f16, sums in f32, as PyTorch's bf16 flash backward rounds its
   * operands. On the H100 (commit d04b78b, against `blocked`): the bundled model's train
   * step at 16 x 2,048 took 46.8 against 64.6 ms, Qwen2.5-0.5B's at 8 x 512 188.8
   * against 198.2 ms, the update of the household preset's RL iteration with random
   * weights 2.89 against 3.66 s (docs/PERFORMANCE.md section 5).
   */
  tensorBackward: boolean;
  /** Backwards with fewer score entries keep the f32 kernels, as tensorForwardMinScores. */
  tensorBackwardMinScores: number;
  /**
   * Taped forwards, and training forwards (below), on the tensor-core forward exactly
   * where their backward runs on the tensor-core backward: the backward then reads an
   * lse of its own rounding. Off, they keep the f32 forward, whose lse the tensor-core
   * backward takes within f16 rounding (tests/attention_tensor.test.ts). Off until timed
   * (`dev/speed_aims.sh`): the profiles of docs/RESULTS.md section 3 put the f32 forward
   * at 12% of the bundled model's update and 9% of Qwen2.5-0.5B's.
   */
  tensorTrainingForward: boolean;
  /**
   * Set (by TRAINING_FORWARD) while a forward without a tape records what a training
   * forward computes, so that it takes the kernels a taped forward would.
   */
  trainingForward: boolean;
  /**
   * A decode step's attention cuts each row's keys into parts (one workgroup each, then
   * a combining dispatch) until its workgroups hold about this many invocations (32 a
   * query head of a workgroup's block). At batch 1 the 0.5B shapes gave its 2 kv heads'
   * workgroups 0.09 ms a layer on the H100 walking 420 keys alone, against 0.036 for one
   * workgroup a query head (`dc6f980`); the default is the 256 workgroups of 256
   * invocations the kernel before the current one was tuned to.
   */
  decodeInvocations: number;
  /**
   * Most keys a decode workgroup stages at once (a power of two from 8 to 256; fewer
   * where workgroup memory is short or a lane would carry more than 8 vec4s of a chunk
   * ahead): each chunk costs four barriers, so longer chunks pay them fewer times for
   * more workgroup memory and registers.
   */
  decodeChunk: number;
}

/** When reduce_cols cuts R into parts (kernels/reduce.ts; see the shader's header). */
export interface ReducePolicy {
  /** reduce_cols workgroups below which a real GPU is starved (an H200 has 132 multiprocessors). */
  minWorkgroups: number;
  /** Workgroups to aim for once cut. */
  targetWorkgroups: number;
  /** Fewest rows per part. */
  minSpan: number;
}

/** How decoding loops run (engines/local_engine.ts) and when Qwen decode steps take the fused layers (models/qwen_decode.ts); `--decode-*`. */
export interface DecodePolicy {
  /**
   * 'auto' where the skinny path would be taken, 'always' also on the software GPU
   * (tests), 'never' keeps the op-by-op layer.
   */
  fused: 'auto' | 'always' | 'never';
  /**
   * Under 'auto', a model whose every projection weight holds at most this many bytes
   * takes the fused layers at any row count: such weights stay in L2, so the skinny
   * kernels' re-reading them per 8 rows costs little against the dispatches saved. On
   * the H200 the bundled model (hidden 256, weights of at most 768 KiB) decoding 128
   * rows took its rollout from 2.0 to 1.6 s a GRPO iteration fused, and 512-row
   * validations 5.0-5.2 s against 5.0-6.0 (commit f8cecff, --decode-fused always).
   */
  fusedAnyRowsMaxBytes: number;
  /** Steps of up to this many rows fold their RMSNorms into the products that follow. */
  foldNormMaxRows: number;
  /**
   * Fused decode steps of at least this many rows run their products on tensor cores
   * (tensor/ops/decode.ts), reading the f16 weight copies, where the device has them:
   * above the skinny kernels' few dozen rows a decode product is too small an output
   * for the f32 tiles to fill the GPU (a rollout's 128 rows of Qwen2.5-0.5B).
   */
  tensorMinRows: number;
  /**
   * A decode product on tensor cores whose output tiles are fewer than this many
   * workgroups cuts k into runs (matmulTensor's `runs`, each at least splitMinK long)
   * until it reaches about this many; 0 never cuts. At 128 rows Qwen2.5-0.5B's
   * down projection (896 columns, k 4,864) is 28 tiles of 64 x 64, and took 57 us a
   * product walking k whole on the H100 (`bench --only decode-matmul --rows 128`),
   * against about 2.5 us for reading its f16 weight once at the memory's speed.
   */
  splitWorkgroups: number;
  /** The shortest run of k a decode product's split takes (a multiple of 32, the tile's K slice). */
  splitMinK: number;
  /**
   * Decode steps recorded between readbacks: sampling, stop checks and each row's
   * progress stay on the GPU in between (tensor/ops/sampling.ts sampleStep), so a
   * readback, a wait for the GPU, serves this many tokens of every row. More wait less
   * often; fewer stop sooner once every row has finished (a chunk runs to its end) and
   * let finished rows leave the batch sooner (it shrinks between chunks). A household
   * rollout of the bundled model on the software GPU (16 episodes, 10 turns, 4,331
   * tokens; one readback a step before): 4 steps took 334 decode steps (318 before)
   * with 0.93 of the row-steps serving unfinished rows (0.94) and 86 readbacks (328);
   * 8 took 366 steps, 0.82, 47 readbacks; 16 took 422, 0.80, 27. Not yet measured
   * on the H200, where a readback costs 33-57 us against 0.2-3 ms a step.
   */
  stepsPerReadback: number;
  /**
   * What the fused decode layers and a sampling step's skinny LM head read: the f32
   * parameters, or f16 copies of them (models/half_weights.ts; shaders/matmul/
   * skinny_f16.wgsl) that rollout engines pack from the f32 masters before each
   * generation. A decode step reads every weight once a token, so f16 halves the bytes
   * that bound it. Prefill, scoring and training keep the f32 weights.
   */
  weights: 'f32' | 'f16';
}

/**
 * Whether passes over sequences run the prefixes several share once (scoring/
 * shared_prefix.ts planSharedPrefixes; `--shared-prefixes`), and what such a pass pays
 * beyond the padded tokens it runs, in tokens of work, for deciding where that pays.
 * `batch` is fitted to the bundled model's teacher pass on the H200
 * (`dev/shared_prefix_passes.ts` at `6555842`, docs/PERFORMANCE.md section 11.1):
 * scored whole, its 2.56M tokens took 1,146 ms in 336 micro-batches and 854 in 80,
 * about 1.1 ms a micro-batch, or 3,700 tokens at the 0.3 µs a token the rest works out
 * to. A larger model's token costs more, so there it overstates a batch. `group` is not measured: a
 * group's prefix is one more row of its batch's prefixes, padded to the longest of them,
 * so a group must save at least about that.
 */
export interface ScoringPolicy {
  /** Off: every sequence is run whole. */
  sharePrefixes: boolean;
  /** A micro-batch's fixed share. */
  batch: number;
  /** Tokens a group of sequences must save by sharing its prefix. */
  group: number;
}

/** How a long wait for the GPU paces the event loop (gpu/paced_wait.ts). */
export interface Pacing {
  /** Waits shorter than this spin. */
  spinMs: number;
  /** Sleep per event-loop turn after that (Atomics.wait's 0.05 ms lasts about 0.1 ms). */
  napMs: number;
}

export interface KernelPolicy {
  matmul: MatmulPolicy;
  tensorCores: TensorCorePolicy;
  splitK: SplitKPolicy;
  streamK: StreamKPolicy;
  attention: AttentionPolicy;
  reduce: ReducePolicy;
  decode: DecodePolicy;
  scoring: ScoringPolicy;
  pacing: Pacing;
}

/** Fields of a policy to change, section by section. */
export type KernelPolicyChanges = { [S in keyof KernelPolicy]?: Partial<KernelPolicy[S]> };

/** The defaults the comments above give the reasons for. */
function defaults(): KernelPolicy {
  return {
    matmul: { skinnyMaxRows: 32, skinnyMaxRowsNarrow: 64, narrowMaxColumns: 16384, originLayouts: ['nn'], wideLayouts: ['nn'], wideMinWorkgroups: 96, tiles: 'rules' },
    tensorCores: { enabled: true, gradients: true, minMacs: 2 ** 30, maxSkinnyRows: 64, wideMinRows: 32 },
    splitK: { runs: 8, maxTiles: 512, targetWorkgroups: 1024, tensorTargetWorkgroups: 256, minChunk: 512, maxChunks: 64 },
    streamK: { multiprocessors: 132, minIdle: 0.05, minShareSlices: 16, shareCostSlices: 16 },
    attention: { path: 'auto', tensorForward: true, tensorForwardMinScores: 2 ** 24, tensorBackward: true, tensorBackwardMinScores: 2 ** 24, tensorTrainingForward: false, trainingForward: false, decodeInvocations: 65536, decodeChunk: 64 },
    reduce: { minWorkgroups: 128, targetWorkgroups: 256, minSpan: 512 },
    decode: { fused: 'auto', fusedAnyRowsMaxBytes: 2 ** 20, foldNormMaxRows: 8, tensorMinRows: 65, splitWorkgroups: 256, splitMinK: 256, stepsPerReadback: 4, weights: 'f16' },
    scoring: { sharePrefixes: true, batch: 3700, group: 256 },
    pacing: { spinMs: 3, napMs: 0.05 },
  };
}

/**
 * A fresh policy: the defaults with `changes` applied. Throws, naming it, on a section
 * or field that does not exist or a value of another type than the default's.
 */
export function kernelPolicy(changes: KernelPolicyChanges = {}): KernelPolicy {
  const policy = defaults();
  applyPolicy(policy, changes);
  return policy;
}

/**
 * What a forward that keeps no tape changes so that it computes as a training forward
 * does: the passes whose results are set against the update's (the old log-probs, the
 * denominator of the policy loss's importance weight; a checkpointed layer's first
 * forward, whose backward recomputes it with gradients). With f16 probabilities in one
 * and f32 in the other, the weight of the first mini-batch would be 1 only to about
 * 1e-3.
 */
export const TRAINING_FORWARD: KernelPolicyChanges = { attention: { trainingForward: true } };

/**
 * Runs `body` with `changes` made to `policy`, then puts back what they replaced. For
 * work recorded synchronously only: across an await other callers would record under
 * the changed policy, so a body that returns a promise is refused.
 */
export function withPolicy<T>(policy: KernelPolicy, changes: KernelPolicyChanges, body: () => T): T {
  const undo = applyPolicy(policy, changes);
  try {
    const r = body();
    if (r instanceof Promise) throw new GpuError('withPolicy: the body must record its work synchronously (it returned a promise)');
    return r;
  } finally {
    applyPolicy(policy, undo);
  }
}

/** Applies `changes` to `policy` in place (checked as kernelPolicy checks them); returns what they replaced. */
export function applyPolicy(policy: KernelPolicy, changes: KernelPolicyChanges): KernelPolicyChanges {
  const sections = policy as unknown as Record<string, Record<string, unknown>>;
  const replaced: Record<string, Record<string, unknown>> = {};
  for (const [name, fields] of Object.entries(changes)) {
    const section = sections[name];
    if (!section) throw new GpuError(`kernel policy: no section "${name}" (have ${Object.keys(sections).join(', ')})`);
    for (const [field, value] of Object.entries(fields ?? {})) {
      if (!(field in section)) throw new GpuError(`kernel policy: ${name} has no field "${field}" (have ${Object.keys(section).join(', ')})`);
      const kind = Array.isArray(section[field]) ? 'array' : typeof section[field];
      if ((Array.isArray(value) ? 'array' : typeof value) !== kind) {
        throw new GpuError(`kernel policy: ${name}.${field} must be ${kind === 'array' ? 'an' : 'a'} ${kind}, got ${JSON.stringify(value)}`);
      }
      (replaced[name] ??= {})[field] = section[field];
      section[field] = value;
    }
  }
  return replaced as KernelPolicyChanges;
}
