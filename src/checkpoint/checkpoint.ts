// Training checkpoints: everything a run needs to continue exactly where it stopped.
//
//   <root>/ckpt-<iteration>/
//     model/                  full fine-tuning: a Hugging Face checkpoint (loads in vLLM/transformers)
//     adapter/                LoRA: a PEFT adapter; the base model's path is in checkpoint.json
//     optimizer.safetensors   AdamW moments, one tensor per parameter and moment
//     optimizer.json          the optimizer's scalars (step)
//     trainer_state.json      iteration, RNG states, config hash, metrics summary, ...
//     checkpoint.json         manifest, written last: format, iteration, model kind, file sizes
//   <root>/latest             the name of the newest complete checkpoint
//
// A checkpoint is built in <root>/ckpt-<iteration>.tmp-<pid> and renamed into place
// only when complete, the `latest` pointer is replaced atomically after that, and old
// checkpoints are deleted only once the new one is in place. A failure at any point
// (a full disk) leaves the previous checkpoints and pointer untouched.

import * as path from '../storage/paths.ts';
import { hostProcess, storage } from '../storage/storage.ts';
import { CheckpointError } from '../hf_model/errors.ts';
import { openCheckpoint, readJson } from '../hf_model/checkpoint.ts';
import { loadModel, saveModel, type LoadOptions } from '../models/load.ts';
import { loadLora, saveLora } from '../lora/lora.ts';
import { readPeftAdapter } from '../lora/peft.ts';
import type { QwenModel } from '../models/qwen.ts';
import { SafetensorsReader } from '../safetensors/reader.ts';
import { writeSafetensors, type StorageDType } from '../safetensors/writer.ts';
import type { RngState } from '../util/random.ts';
import { configDifferences, RESUMABLE_CHANGES } from '../config/config_diff.ts';
import type { TrainConfig } from '../config/config_schema.ts';

export const CHECKPOINT_FORMAT = 'wgt-checkpoint';
export const CHECKPOINT_VERSION = 1;
export const LATEST_FILE = 'latest';
const MANIFEST = 'checkpoint.json';
const TRAINER_STATE = 'trainer_state.json';
const OPTIMIZER_TENSORS = 'optimizer.safetensors';
const OPTIMIZER_SCALARS = 'optimizer.json';
const CKPT_NAME = /^ckpt-(\d+)$/;
const TEMP_NAME = /^ckpt-\d+\.tmp-(\d+)$/;

/** What the loop needs besides weights and optimizer moments to resume exactly. */
export interface TrainerState {
  /** Iterations completed. */
  iteration: number;
  /** configHash() of the run's configuration. */
  configHash: string;
  /** Named generator states (task sampling, engine seeds, ...). */
  rng: Record<string, RngState>;
  /** Latest metrics, for the resume message and the report. */
  metrics?: Record<string, number>;
  /** The method's state between iterations (RetireOPD's retirement, ...), as JSON. */
  methodState?: unknown;
  /** The run's configuration, to name what changed when a resume is refused. */
  config?: unknown;
  /** Anything else the loop keeps, as JSON. */
  [key: string]: unknown;
}

export type ModelSnapshot = (
  /** Full fine-tuning; tokenizer files are copied from `tokenizerDir` (usually the starting checkpoint) so the saved model stands alone. */
  | { kind: 'full'; model: QwenModel; tokenizerDir?: string }
  /** LoRA: only the adapter is saved; `basePath` is the frozen base model it applies to. */
  | { kind: 'lora'; model: QwenModel; basePath: string }
) & {
  /** Float type of the saved weights (default f32). */
  dtype?: StorageDType;
};

export interface CheckpointContents {
  model: ModelSnapshot;
  /** AdamW.stateDict(): `<param>.exp_avg`, `<param>.exp_avg_sq` tensors and the `step` scalar. */
  optimizerState: Readonly<Record<string, Float32Array>>;
  trainerState: TrainerState;
}

/** File writes of the small files, replaceable so tests can make them fail (a full disk). */
export interface CheckpointIO {
  writeFile(file: string, contents: string): void;
}

export const storageIO: CheckpointIO = {
  writeFile(file, contents) {
    const out = storage().openWrite(file);
    try {
      out.write(new TextEncoder().encode(contents), 0);
    } catch (e) {
      out.discard();
      throw e;
    }
    out.close();
  },
};

export interface SaveOptions {
  /** Checkpoints to keep, the new one included; 0 keeps all. */
  keepLast?: number;
  io?: CheckpointIO;
}

export type CheckpointModel = { kind: 'full'; dir: string } | { kind: 'lora'; adapterDir: string; basePath: string };

interface Manifest {
  format: typeof CHECKPOINT_FORMAT;
  version: number;
  iteration: number;
  model: { kind: 'full' } | { kind: 'lora'; basePath: string };
  /** Relative path -> size in bytes, for every file of the checkpoint but the manifest. */
  files: Record<string, number>;
}

export function checkpointName(iteration: number): string {
  return `ckpt-${iteration}`;
}

/** Writes a checkpoint of iteration trainerState.iteration under `root`; returns its directory. */
export async function saveCheckpoint(root: string, contents: CheckpointContents, opts: SaveOptions = {}): Promise<string> {
  const io = opts.io ?? storageIO;
  const fs = storage();
  const { iteration } = contents.trainerState;
  checkTrainerState(contents.trainerState, 'saveCheckpoint: trainerState');
  fs.makeDir(root);
  removeAbandonedTemps(root);
  const name = checkpointName(iteration);
  const final = path.join(root, name);
  const temp = path.join(root, `${name}.tmp-${hostProcess().pid}`);
  const previous = latestName(root);
  try {
    fs.remove(temp);
    fs.makeDir(temp);
    await fill(temp, contents, io);
    moveIntoPlace(temp, final);
    try {
      writePointer(root, name, io);
    } catch (e) {
      // The pointer still names the previous checkpoint; drop the new one (it may be what filled the disk).
      if (previous !== name) fs.remove(final);
      throw e;
    }
  } catch (e) {
    fs.remove(temp);
    const err = e as NodeJS.ErrnoException;
    const reason = err.code === 'ENOSPC' ? `the disk is full (${err.message})` : err.message;
    const kept = previous ? `the last good checkpoint ${path.join(root, previous)} is intact` : 'there is no earlier checkpoint';
    throw new CheckpointError(`saving checkpoint ${final} failed: ${reason}; ${kept}`, { cause: e });
  }
  if (opts.keepLast) prune(root, iteration, opts.keepLast);
  await fs.flush();
  return final;
}

async function fill(dir: string, { model, optimizerState, trainerState }: CheckpointContents, io: CheckpointIO): Promise<void> {
  if (model.kind === 'full') {
    if (model.model.lora.size) throw new CheckpointError('saveCheckpoint: the model has LoRA adapters attached; save it as { kind: "lora" } (or merge first)');
    await saveModel(model.model, path.join(dir, 'model'), { tokenizerDir: model.tokenizerDir, dtype: model.dtype });
  } else {
    await saveLora(model.model, path.join(dir, 'adapter'), { dtype: model.dtype });
  }
  const tensors: [string, Float32Array, number[]][] = [];
  const scalars: Record<string, number> = {};
  for (const [key, value] of Object.entries(optimizerState)) {
    // Top-level names (step) are scalars; per-parameter moments are `<param>.<moment>`.
    if (!key.includes('.')) {
      if (value.length !== 1) throw new CheckpointError(`saveCheckpoint: optimizer scalar "${key}" has ${value.length} values`);
      scalars[key] = value[0];
    } else tensors.push([key, value, [value.length]]);
  }
  writeSafetensors(path.join(dir, OPTIMIZER_TENSORS), tensors, { shardBytes: Infinity });
  io.writeFile(path.join(dir, OPTIMIZER_SCALARS), JSON.stringify(scalars, null, 2) + '\n');
  io.writeFile(path.join(dir, TRAINER_STATE), JSON.stringify(trainerState, null, 2) + '\n');
  const manifest: Manifest = {
    format: CHECKPOINT_FORMAT,
    version: CHECKPOINT_VERSION,
    iteration: trainerState.iteration,
    model: model.kind === 'full' ? { kind: 'full' } : { kind: 'lora', basePath: path.resolve(model.basePath) },
    files: Object.fromEntries(listFiles(dir).map((f) => [f, storage().stat(path.join(dir, f))!.size])),
  };
  io.writeFile(path.join(dir, MANIFEST), JSON.stringify(manifest, null, 2) + '\n');
}

function listFiles(dir: string, prefix = ''): string[] {
  return storage().list(path.join(dir, prefix)).flatMap((name) => {
    const rel = prefix ? `${prefix}/${name}` : name;
    return storage().stat(path.join(dir, rel))?.isDirectory ? listFiles(dir, rel) : [rel];
  }).sort();
}

/** Renames `temp` to `final`; an existing `final` (the same iteration saved again) is replaced only once `temp` is in place. */
function moveIntoPlace(temp: string, final: string): void {
  const fs = storage();
  if (!fs.exists(final)) {
    fs.rename(temp, final);
  } else {
    const aside = `${final}.old-${hostProcess().pid}`;
    fs.remove(aside);
    fs.rename(final, aside);
    try {
      fs.rename(temp, final);
    } catch (e) {
      fs.rename(aside, final);
      throw e;
    }
    fs.remove(aside);
  }
}

function writePointer(root: string, name: string, io: CheckpointIO): void {
  const file = path.join(root, LATEST_FILE);
  const temp = `${file}.tmp-${hostProcess().pid}`;
  try {
    io.writeFile(temp, name + '\n');
    storage().rename(temp, file);
  } catch (e) {
    storage().remove(temp);
    throw e;
  }
}

/** Temporary directories left by a process that died mid-save. */
function removeAbandonedTemps(root: string): void {
  const host = hostProcess();
  for (const entry of storage().list(root)) {
    const m = TEMP_NAME.exec(entry);
    if (m && Number(m[1]) !== host.pid && !host.alive(Number(m[1]))) storage().remove(path.join(root, entry));
  }
}

/** Iterations of the complete-looking checkpoint directories under `root`, ascending. */
export function listCheckpoints(root: string): number[] {
  if (!storage().exists(root)) return [];
  return storage().list(root)
    .map((e) => CKPT_NAME.exec(e))
    .filter((m): m is RegExpExecArray => m !== null && storage().exists(path.join(root, m[0], MANIFEST)))
    .map((m) => Number(m[1]))
    .sort((a, b) => a - b);
}

/**
 * Keeps the `keep` newest checkpoints up to `current`. Checkpoints past `current` come
 * from a run that was resumed from an earlier point; they are left for the user.
 */
function prune(root: string, current: number, keep: number): void {
  const older = listCheckpoints(root).filter((it) => it <= current);
  for (const it of older.slice(0, Math.max(0, older.length - keep))) storage().remove(path.join(root, checkpointName(it)));
}

function latestName(root: string): string | null {
  const file = path.join(root, LATEST_FILE);
  const stat = storage().stat(file);
  if (!stat || stat.isDirectory) return null;
  const name = storage().readText(file).trim();
  return CKPT_NAME.test(name) && storage().exists(path.join(root, name, MANIFEST)) ? name : null;
}

/**
 * The checkpoint to resume from: the one `latest` names, or (pointer missing or
 * stale) the highest-numbered complete one; null when there is none.
 */
export function findLatestCheckpoint(root: string): string | null {
  const named = latestName(root);
  if (named) return path.join(root, named);
  const all = listCheckpoints(root);
  return all.length ? path.join(root, checkpointName(all[all.length - 1])) : null;
}

/** The iteration a checkpoint directory (ckpt-N) was saved at. */
export function checkpointIteration(dir: string): number {
  const m = CKPT_NAME.exec(path.basename(dir));
  if (!m) throw new Error(`${dir}: not a checkpoint directory (ckpt-N)`);
  return Number(m[1]);
}

export interface LoadedCheckpoint {
  dir: string;
  iteration: number;
  model: CheckpointModel;
  optimizerState: Record<string, Float32Array>;
  trainerState: TrainerState;
}

/** Reads and checks a checkpoint directory; errors name the offending file. */
export function loadCheckpoint(dir: string): LoadedCheckpoint {
  const manifestPath = path.join(dir, MANIFEST);
  if (!storage().exists(dir)) throw new CheckpointError(`${dir}: checkpoint directory not found`);
  if (!storage().exists(manifestPath)) throw new CheckpointError(`${manifestPath}: not found (an incomplete checkpoint, or not a checkpoint directory)`);
  const manifest = parseManifest(readJson(manifestPath), manifestPath);
  for (const [rel, size] of Object.entries(manifest.files)) {
    const file = path.join(dir, rel);
    if (!storage().exists(file)) throw new CheckpointError(`${file}: missing (listed in ${MANIFEST})`);
    const actual = storage().stat(file)!.size;
    if (actual !== size) throw new CheckpointError(`${file}: ${actual} bytes, but ${MANIFEST} says ${size} (truncated or modified)`);
  }
  const statePath = path.join(dir, TRAINER_STATE);
  const trainerState = readJson(statePath) as TrainerState;
  checkTrainerState(trainerState, statePath);
  if (trainerState.iteration !== manifest.iteration) {
    throw new CheckpointError(`${statePath}: iteration ${trainerState.iteration} does not match ${MANIFEST}'s ${manifest.iteration}`);
  }
  const model: CheckpointModel = manifest.model.kind === 'full'
    ? { kind: 'full', dir: path.join(dir, 'model') }
    : { kind: 'lora', adapterDir: path.join(dir, 'adapter'), basePath: manifest.model.basePath };
  checkModel(model);
  return { dir, iteration: manifest.iteration, model, optimizerState: readOptimizer(dir), trainerState };
}

function parseManifest(raw: Record<string, unknown>, where: string): Manifest {
  if (raw.format !== CHECKPOINT_FORMAT) throw new CheckpointError(`${where}: format is ${JSON.stringify(raw.format)}, expected "${CHECKPOINT_FORMAT}"`);
  if (raw.version !== CHECKPOINT_VERSION) throw new CheckpointError(`${where}: version ${JSON.stringify(raw.version)} is not supported (this trainer reads ${CHECKPOINT_VERSION})`);
  if (!Number.isInteger(raw.iteration) || (raw.iteration as number) < 0) throw new CheckpointError(`${where}: iteration must be a non-negative integer, got ${JSON.stringify(raw.iteration)}`);
  const m = raw.model as Manifest['model'] | undefined;
  const okModel = m && (m.kind === 'full' || (m.kind === 'lora' && typeof m.basePath === 'string'));
  if (!okModel) throw new CheckpointError(`${where}: model must be {"kind": "full"} or {"kind": "lora", "basePath": ...}, got ${JSON.stringify(m)}`);
  const files = raw.files as Record<string, unknown> | undefined;
  const okFiles = files && typeof files === 'object' && Object.entries(files).every(([k, v]) => Number.isInteger(v) && !k.split('/').includes('..'));
  if (!okFiles) throw new CheckpointError(`${where}: files must map relative paths to byte sizes`);
  return raw as unknown as Manifest;
}

function checkTrainerState(s: TrainerState, where: string): void {
  if (!Number.isInteger(s.iteration) || s.iteration < 0) throw new CheckpointError(`${where}: iteration must be a non-negative integer, got ${JSON.stringify(s.iteration)}`);
  if (typeof s.configHash !== 'string' || !s.configHash) throw new CheckpointError(`${where}: configHash must be a non-empty string`);
  if (typeof s.rng !== 'object' || s.rng === null) throw new CheckpointError(`${where}: rng must map stream names to generator states`);
  for (const [k, v] of Object.entries(s.rng)) {
    if (!Array.isArray(v) || v.length !== 4 || !v.every((w) => Number.isInteger(w) && w >= 0 && w < 2 ** 32)) {
      throw new CheckpointError(`${where}: rng.${k} must be four unsigned 32-bit integers, got ${JSON.stringify(v)}`);
    }
  }
}

function checkModel(model: CheckpointModel): void {
  if (model.kind === 'full') {
    openCheckpoint(model.dir).close();
    return;
  }
  if (!storage().exists(path.join(model.basePath, 'config.json'))) {
    throw new CheckpointError(`${model.basePath}: the LoRA checkpoint's base model is missing (no config.json)`);
  }
  const base = openCheckpoint(model.basePath);
  try {
    readPeftAdapter(model.adapterDir, base.config);
  } finally {
    base.close();
  }
}

function readOptimizer(dir: string): Record<string, Float32Array> {
  const scalarsPath = path.join(dir, OPTIMIZER_SCALARS);
  const scalars = readJson(scalarsPath);
  const state: Record<string, Float32Array> = {};
  for (const [k, v] of Object.entries(scalars)) {
    if (typeof v !== 'number' || !Number.isFinite(v)) throw new CheckpointError(`${scalarsPath}: "${k}" must be a finite number, got ${JSON.stringify(v)}`);
    state[k] = Float32Array.of(v);
  }
  const reader = SafetensorsReader.open(path.join(dir, OPTIMIZER_TENSORS));
  try {
    for (const name of reader.names()) {
      if (name in state) throw new CheckpointError(`${path.join(dir, OPTIMIZER_TENSORS)}: "${name}" is also a scalar in ${OPTIMIZER_SCALARS}`);
      state[name] = reader.readFloat32(name);
    }
  } finally {
    reader.close();
  }
  return state;
}

/** Builds the checkpoint's model on the GPU: the saved weights, or the base with the saved adapter attached. */
export function restoreModel(ckpt: Pick<LoadedCheckpoint, 'model'>, opts: LoadOptions = {}): QwenModel {
  if (ckpt.model.kind === 'full') return loadModel(ckpt.model.dir, opts);
  const model = loadModel(ckpt.model.basePath, { trainable: false });
  loadLora(model, ckpt.model.adapterDir);
  return model;
}

/**
 * Refuses to resume a checkpoint made under a different configuration, naming the
 * settings that differ: from the checkpoint's own record of its configuration, else
 * `recorded` (the run directory's config.json), else only the hashes.
 */
export function assertResumable(state: TrainerState, configHash: string, where: string, current: TrainConfig, recorded: unknown = null): void {
  if (state.configHash === configHash) return;
  const before = state.config ?? recorded;
  const changes = before ? configDifferences(before, current) : [];
  const what = changes.length ? `these settings differ from the checkpoint's: ${changes.join(', ')}` : `its config hash is ${state.configHash}, this run's ${configHash}`;
  throw new CheckpointError(
    `${where}: the checkpoint was made with another configuration; ${what}. Only ${RESUMABLE_CHANGES.map((k) => (k === 'iterations' ? k : `${k}.*`)).join(', ')} `
    + 'may change on resume: put the settings back, or start a new run (output.runName=NAME, or --overwrite)',
  );
}

/**
 * The checkpoint a resumed run starts from: `name` (ckpt-N) when given, else the newest
 * one that loads. A damaged newest checkpoint (truncated, a file missing) is passed over
 * for the one before, and `log` says so; a named one must load.
 */
export function loadResumeCheckpoint(root: string, opts: { name?: string; log?: (line: string) => void } = {}): LoadedCheckpoint {
  if (opts.name) return loadCheckpoint(path.join(root, opts.name));
  const pointer = latestName(root);
  const names = [...new Set([...(pointer ? [pointer] : []), ...listCheckpoints(root).reverse().map(checkpointName)])];
  const damaged: string[] = [];
  for (const name of names) {
    try {
      const ckpt = loadCheckpoint(path.join(root, name));
      if (damaged.length) opts.log?.(`${damaged.join('; ')}; resuming from ${name}, the newest intact checkpoint`);
      return ckpt;
    } catch (e) {
      if (!(e instanceof CheckpointError)) throw e;
      damaged.push(`${name} is damaged (${e.message})`);
    }
  }
  throw new CheckpointError(damaged.length ? `no intact checkpoint under ${root}: ${damaged.join('; ')}` : `no checkpoint under ${root}`);
}
