// Hugging Face checkpoint directories: config.json + safetensors (single or sharded) +
// generation_config.json + tokenizer files.
//
// Parameters keep their HF names, so loading is a name lookup: openCheckpoint checks the
// tensors against the shapes the config implies and hands them out one at a time (the
// caller uploads each and drops it), and exportCheckpoint writes a directory that
// transformers and vLLM load unchanged, atomically replacing any previous one.

import * as path from '../storage/paths.ts';
import { storage } from '../storage/storage.ts';
import { replaceDirAtomic, writeFileAtomic } from '../util/atomic_file.ts';
import { parseConfig, toHfConfig, type ModelConfig } from './config.ts';
import { CheckpointError, ConfigError } from './errors.ts';
import { SafetensorsReader, type TensorInfo } from '../safetensors/reader.ts';
import { SafetensorsWriter, type StorageDType, type TensorEntry, type WrittenCheckpoint } from '../safetensors/writer.ts';

/** HF parameter names and shapes of `cfg`'s model, in transformers' module order. */
export function expectedShapes(cfg: ModelConfig): Map<string, number[]> {
  const m = new Map<string, number[]>();
  const p = cfg.weightPrefix;
  const { hidden, headDim } = cfg;
  m.set(`${p}embed_tokens.weight`, [cfg.vocabSize, hidden]);
  for (let l = 0; l < cfg.layers; l++) {
    const pre = `${p}layers.${l}`;
    if (cfg.layerTypes[l] === 'linear_attention') linearAttentionShapes(m, `${pre}.linear_attn`, cfg);
    else {
      const a = `${pre}.self_attn`;
      const qRows = cfg.heads * headDim * (cfg.attnOutputGate ? 2 : 1);
      const kvRows = cfg.kvHeads * headDim;
      for (const [name, rows] of [['q', qRows], ['k', kvRows], ['v', kvRows]] as const) {
        m.set(`${a}.${name}_proj.weight`, [rows, hidden]);
        if (cfg.attentionBias) m.set(`${a}.${name}_proj.bias`, [rows]);
      }
      m.set(`${a}.o_proj.weight`, [hidden, cfg.heads * headDim]);
      if (cfg.outputBias) m.set(`${a}.o_proj.bias`, [hidden]);
      if (cfg.qkNorm) {
        m.set(`${a}.q_norm.weight`, [headDim]);
        m.set(`${a}.k_norm.weight`, [headDim]);
      }
    }
    m.set(`${pre}.mlp.gate_proj.weight`, [cfg.intermediate, hidden]);
    m.set(`${pre}.mlp.up_proj.weight`, [cfg.intermediate, hidden]);
    m.set(`${pre}.mlp.down_proj.weight`, [hidden, cfg.intermediate]);
    m.set(`${pre}.input_layernorm.weight`, [hidden]);
    m.set(`${pre}.post_attention_layernorm.weight`, [hidden]);
  }
  m.set(`${p}norm.weight`, [hidden]);
  if (!cfg.tieEmbeddings) m.set('lm_head.weight', [cfg.vocabSize, hidden]);
  return m;
}

/** Qwen3.5's Gated DeltaNet: fused q|k|v projection feeding a depthwise causal conv, z gate, per-head a/b. */
function linearAttentionShapes(m: Map<string, number[]>, a: string, cfg: ModelConfig): void {
  const lin = cfg.linearAttention;
  if (!lin) throw new ConfigError(`layer ${a} is linear_attention but the config has no linear attention settings`);
  const keyDim = lin.numKeyHeads * lin.keyHeadDim;
  const valueDim = lin.numValueHeads * lin.valueHeadDim;
  const convDim = 2 * keyDim + valueDim;
  m.set(`${a}.dt_bias`, [lin.numValueHeads]);
  m.set(`${a}.A_log`, [lin.numValueHeads]);
  m.set(`${a}.conv1d.weight`, [convDim, 1, lin.convKernel]);
  m.set(`${a}.norm.weight`, [lin.valueHeadDim]);
  m.set(`${a}.out_proj.weight`, [cfg.hidden, valueDim]);
  m.set(`${a}.in_proj_qkv.weight`, [convDim, cfg.hidden]);
  m.set(`${a}.in_proj_z.weight`, [valueDim, cfg.hidden]);
  m.set(`${a}.in_proj_b.weight`, [lin.numValueHeads, cfg.hidden]);
  m.set(`${a}.in_proj_a.weight`, [lin.numValueHeads, cfg.hidden]);
}

/** Stored tensors transformers itself skips on load: MTP heads, the vision tower, stale RoPE buffers, a tied lm_head. */
function ignorable(cfg: ModelConfig): (name: string) => boolean {
  return (name) => name.startsWith('mtp.') || name.startsWith('model.visual.') || name.endsWith('.rotary_emb.inv_freq')
    || (cfg.tieEmbeddings && name === 'lm_head.weight');
}

export function readJson(file: string): Record<string, unknown> {
  let v: unknown;
  try {
    v = JSON.parse(storage().readText(file));
  } catch (e) {
    throw new CheckpointError(`${file}: cannot read JSON (${(e as Error).message})`);
  }
  if (typeof v !== 'object' || v === null || Array.isArray(v)) throw new CheckpointError(`${file}: expected a JSON object`);
  return v as Record<string, unknown>;
}

export interface Checkpoint {
  readonly dir: string;
  readonly config: ModelConfig;
  /** generation_config.json, when the directory has one. */
  readonly generationConfig: Record<string, unknown> | null;
  /** The model's parameter names, in module order. */
  names(): string[];
  info(name: string): TensorInfo;
  /** One parameter as f32, read from disk now (F16/BF16 are widened). */
  read(name: string): Float32Array;
  /** Every parameter, one at a time, so the caller can upload each and let it go. */
  tensors(): Generator<TensorEntry>;
  close(): void;
}

/** A checkpoint directory's model config, from its config.json alone (no weights read). */
export function readModelConfig(dir: string): ModelConfig {
  const configPath = path.join(dir, 'config.json');
  if (!storage().exists(configPath)) throw new CheckpointError(`${dir}: config.json not found`);
  return parseConfig(readJson(configPath), configPath);
}

/**
 * Opens a checkpoint directory: parses config.json and checks the safetensors hold
 * exactly the parameters (names, shapes, float dtypes) the config implies.
 */
export function openCheckpoint(dir: string): Checkpoint {
  const config = readModelConfig(dir);
  const genPath = path.join(dir, 'generation_config.json');
  const generationConfig = storage().exists(genPath) ? readJson(genPath) : null;
  const reader = SafetensorsReader.open(dir);
  const expected = expectedShapes(config);
  try {
    reader.expectShapes(expected, ignorable(config));
  } catch (e) {
    reader.close();
    throw e;
  }
  const names = [...expected.keys()];
  return {
    dir,
    config,
    generationConfig,
    names: () => names.slice(),
    info: (name) => reader.info(name),
    read: (name) => reader.readFloat32(name),
    *tensors() {
      for (const name of names) yield [name, reader.readFloat32(name), expected.get(name)!] as const;
    },
    close: () => reader.close(),
  };
}

/** The float type most of the checkpoint's parameter bytes are stored in: what a copy of it keeps by default. */
export function storedDtype(ckpt: Checkpoint): StorageDType {
  const bytes = new Map<string, number>();
  for (const name of ckpt.names()) {
    const info = ckpt.info(name);
    bytes.set(info.dtype, (bytes.get(info.dtype) ?? 0) + info.byteLength);
  }
  const [dtype] = [...bytes].sort((a, b) => b[1] - a[1])[0] ?? ['F32'];
  return dtype as StorageDType;
}

/** Tokenizer files transformers and vLLM look for; the first two are required. */
export const TOKENIZER_FILES = [
  'tokenizer.json', 'tokenizer_config.json', 'vocab.json', 'merges.txt', 'special_tokens_map.json',
  'added_tokens.json', 'chat_template.jinja', 'chat_template.json',
];

export interface ExportOptions {
  /** Directory whose tokenizer files are copied alongside the weights. */
  tokenizerDir?: string;
  /** Shard above this many bytes (default HF's 5 GB). */
  shardBytes?: number;
  /** generation_config.json contents (default: bos/eos from the config). */
  generationConfig?: Record<string, unknown>;
  /** Storage dtype (default F32); config.json's dtype follows it. */
  dtype?: StorageDType;
}

const TORCH_DTYPE: Record<StorageDType, string> = { F32: 'float32', F16: 'float16', BF16: 'bfloat16' };

function sortKeys(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(sortKeys);
  if (typeof v !== 'object' || v === null) return v;
  return Object.fromEntries(Object.keys(v).sort().map((k) => [k, sortKeys((v as Record<string, unknown>)[k])]));
}

/** JSON as transformers writes it: sorted keys, two-space indent. */
export function hfJson(v: unknown): string {
  return JSON.stringify(sortKeys(v), null, 2) + '\n';
}

/**
 * Writes a complete HF checkpoint of `cfg` to `dir`. `tensors` must yield every
 * parameter of expectedShapes(cfg) exactly once, in any order; each is written to disk
 * as it arrives. The directory is built beside `dir` and renamed into place at the end.
 */
export async function exportCheckpoint(
  dir: string, cfg: ModelConfig, tensors: Iterable<TensorEntry> | AsyncIterable<TensorEntry>, opts: ExportOptions = {},
): Promise<WrittenCheckpoint> {
  if (cfg.weightPrefix !== 'model.') {
    throw new CheckpointError(`exportCheckpoint: ${cfg.architecture} (weights under ${cfg.weightPrefix}) cannot be exported: the vision tower is not kept`);
  }
  const dtype = opts.dtype ?? 'F32';
  const expected = expectedShapes(cfg);
  const tokenizerFiles = opts.tokenizerDir ? tokenizerFilesIn(opts.tokenizerDir) : [];
  return replaceDirAtomic(dir, async (tmp) => {
    const writer = SafetensorsWriter.create(tmp, [...expected].map(([name, shape]) => ({ name, shape })), { dtype, shardBytes: opts.shardBytes });
    let written: WrittenCheckpoint;
    try {
      for await (const [name, data, shape] of tensors) {
        const want = expected.get(name);
        if (!want) throw new CheckpointError(`exportCheckpoint: tensor "${name}" is not a parameter of the configured model`);
        if (shape.length !== want.length || shape.some((d, i) => d !== want[i])) {
          throw new CheckpointError(`exportCheckpoint: tensor "${name}" has shape [${shape.join(', ')}] but the config implies [${want.join(', ')}]`);
        }
        writer.write(name, data);
      }
      written = writer.finish();
    } catch (e) {
      writer.abort();
      throw e;
    }
    writeFileAtomic(path.join(tmp, 'config.json'), hfJson(toHfConfig(cfg, { dtype: TORCH_DTYPE[dtype] })));
    writeFileAtomic(path.join(tmp, 'generation_config.json'), hfJson(opts.generationConfig ?? defaultGenerationConfig(cfg)));
    for (const file of tokenizerFiles) writeFileAtomic(path.join(tmp, path.basename(file)), storage().readBytes(file));
    const rel = (f: string) => path.join(dir, path.basename(f));
    return { files: written.files.map(rel), index: written.index && rel(written.index), totalSize: written.totalSize };
  });
}

function tokenizerFilesIn(dir: string): string[] {
  for (const required of TOKENIZER_FILES.slice(0, 2)) {
    if (!storage().exists(path.join(dir, required))) throw new CheckpointError(`${dir}: ${required} not found (tokenizerDir must hold a Hugging Face tokenizer)`);
  }
  return TOKENIZER_FILES.map((f) => path.join(dir, f)).filter((f) => storage().exists(f));
}

function defaultGenerationConfig(cfg: ModelConfig): Record<string, unknown> {
  const g: Record<string, unknown> = { _from_model_config: true };
  if (cfg.bosTokenId !== null) g.bos_token_id = cfg.bosTokenId;
  if (cfg.eosTokenIds.length > 0) g.eos_token_id = cfg.eosTokenIds.length === 1 ? cfg.eosTokenIds[0] : [...cfg.eosTokenIds];
  if (cfg.padTokenId !== null) g.pad_token_id = cfg.padTokenId;
  return g;
}
