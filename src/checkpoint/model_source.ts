// What a path given as "the model" to evaluate names: a Hugging Face model directory,
// a training checkpoint (full weights, or a LoRA adapter over its base model), or a
// run directory (its latest checkpoint). A checkpoint inside a run directory brings
// the run's configuration along, so evaluation defaults to the run's environment and
// budgets.

import { storage } from '../storage/storage.ts';
import * as path from '../storage/paths.ts';
import type { CausalLM } from '../models/causal_lm.ts';
import { loadCausalLM } from '../models/load.ts';
import { loadLora } from '../lora/lora.ts';
import { findLatestCheckpoint, loadCheckpoint, type CheckpointModel } from './checkpoint.ts';
import { validateConfig, type TrainConfig } from '../config/config.ts';
import { RUN_CONFIG_FILE } from '../report/run_files.ts';

/** A model path that names nothing loadable; the message names the option and the path. */
export class ModelSourceError extends Error {
  override name = 'ModelSourceError';
}

export interface ModelSource<Tokenizer extends string | null = string> {
  /** The path as given. */
  input: string;
  kind: 'model' | 'checkpoint' | 'run';
  /** The training checkpoint read (kinds checkpoint and run). */
  checkpoint: string | null;
  /** Its iteration (for an SFT run, its optimizer steps). */
  iteration: number | null;
  weights: CheckpointModel;
  /** Where tokenizer.json is (null: none, where the caller allowed that). */
  tokenizerDir: Tokenizer;
  /** The configuration of the run the checkpoint belongs to, when it can be found and read. */
  runConfig: TrainConfig | null;
  /** Why a run configuration next to the checkpoint was not used. */
  runConfigProblem: string | null;
}

const CHECKPOINT_MANIFEST = 'checkpoint.json';

function readRunConfig(runDir: string): { config: TrainConfig | null; problem: string | null } {
  const file = path.join(runDir, RUN_CONFIG_FILE);
  if (!storage().exists(file)) return { config: null, problem: null };
  try {
    return { config: validateConfig(JSON.parse(storage().readText(file))), problem: null };
  } catch (e) {
    return { config: null, problem: `${file}: ${(e as Error).message}` };
  }
}

function hasTokenizer(dir: string): boolean {
  return storage().exists(path.join(dir, 'tokenizer.json'));
}

interface ResolveOptions {
  /** Whether a model without tokenizer.json is refused (default) or resolved with tokenizerDir null. */
  tokenizer?: 'required' | 'optional';
}

function fromCheckpoint(input: string, dir: string, kind: 'checkpoint' | 'run', runDir: string | null, option: string, opts: ResolveOptions): ModelSource<string | null> {
  let ckpt;
  try {
    ckpt = loadCheckpoint(dir);
  } catch (e) {
    throw new ModelSourceError(`${option} ${input}: ${(e as Error).message}`, { cause: e });
  }
  const run = runDir ? readRunConfig(runDir) : { config: null, problem: null };
  const candidates = ckpt.model.kind === 'full' ? [ckpt.model.dir, run.config?.model.path] : [ckpt.model.basePath];
  const tokenizerDir = candidates.find((d): d is string => d !== undefined && hasTokenizer(d)) ?? null;
  if (!tokenizerDir && opts.tokenizer !== 'optional') throw new ModelSourceError(`${option} ${input}: no tokenizer.json in ${candidates.filter(Boolean).join(' or ')}`);
  return { input, kind, checkpoint: dir, iteration: ckpt.iteration, weights: ckpt.model, tokenizerDir, runConfig: run.config, runConfigProblem: run.problem };
}

/** Resolves `input`; `option` names it in messages (a flag or an argument name). */
export function resolveModelSource(input: string, option?: string): ModelSource;
export function resolveModelSource(input: string, option: string, opts: ResolveOptions): ModelSource<string | null>;
export function resolveModelSource(input: string, option = 'model', opts: ResolveOptions = {}): ModelSource<string | null> {
  if (!storage().exists(input)) throw new ModelSourceError(`${option} ${input}: no such directory`);
  if (!storage().stat(input)?.isDirectory) throw new ModelSourceError(`${option} ${input}: not a directory`);
  if (storage().exists(path.join(input, CHECKPOINT_MANIFEST))) {
    // <run>/checkpoints/ckpt-N: the run is two levels up.
    const runDir = path.dirname(path.dirname(path.resolve(input)));
    return fromCheckpoint(input, input, 'checkpoint', storage().exists(path.join(runDir, 'checkpoints')) ? runDir : null, option, opts);
  }
  const root = path.join(input, 'checkpoints');
  if (storage().exists(root)) {
    const latest = findLatestCheckpoint(root);
    if (!latest) throw new ModelSourceError(`${option} ${input}: a run directory with no complete checkpoint under ${root}`);
    return fromCheckpoint(input, latest, 'run', input, option, opts);
  }
  if (!storage().exists(path.join(input, 'config.json'))) {
    throw new ModelSourceError(`${option} ${input}: not a Hugging Face model directory (config.json), a training checkpoint (${CHECKPOINT_MANIFEST}) or a run directory (checkpoints/)`);
  }
  const tokenizerDir = hasTokenizer(input) ? input : null;
  if (!tokenizerDir && opts.tokenizer !== 'optional') throw new ModelSourceError(`${option} ${input}: the model directory has no tokenizer.json`);
  return { input, kind: 'model', checkpoint: null, iteration: null, weights: { kind: 'full', dir: input }, tokenizerDir, runConfig: null, runConfigProblem: null };
}

/** Loads the source's weights on the GPU, frozen: a full model, or the base with the adapter attached. */
export function loadModelSource(src: ModelSource<string | null>, option = 'model'): CausalLM {
  const w = src.weights;
  try {
    if (w.kind === 'full') return loadCausalLM(w.dir, { trainable: false });
    const model = loadCausalLM(w.basePath, { trainable: false });
    loadLora(model, w.adapterDir);
    return model;
  } catch (e) {
    throw new ModelSourceError(`${option} ${src.input}: cannot load the model (${(e as Error).message})`, { cause: e });
  }
}
