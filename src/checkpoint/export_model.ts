// `export`: a model source (a model directory, a training checkpoint, a run) written out
// as what other tools load. Full weights become a Hugging Face model directory in the
// chosen float type (default: as stored); a LoRA checkpoint becomes its PEFT adapter
// directory (vLLM's --lora-modules, PEFT), or with `merge` the base model with the
// adapter folded in. Tokenizer files go along, so the directory stands alone.

import { storage } from '../storage/storage.ts';
import * as path from '../storage/paths.ts';
import { exportCheckpoint, openCheckpoint, storedDtype, TOKENIZER_FILES } from '../hf_model/checkpoint.ts';
import { saveModel } from '../models/load.ts';
import { mergeLora } from '../lora/lora.ts';
import { ADAPTER_CONFIG, ADAPTER_WEIGHTS } from '../lora/peft.ts';
import type { StorageDType } from '../safetensors/writer.ts';
import { replaceDirAtomic } from '../util/atomic_file.ts';
import { loadModelSource, type ModelSource } from './model_source.ts';

export interface ExportModelOptions {
  /** Float type of the written weights (default: the source's). */
  dtype?: StorageDType;
  /** A LoRA source: write the base with the adapter folded in (on the GPU) instead of the adapter. */
  merge?: boolean;
}

export interface ExportedModel {
  dir: string;
  what: 'model' | 'adapter' | 'merged';
  dtype: StorageDType | null;
}

/** Writes `source` to `out` (replaced atomically); what it wrote. */
export async function exportModelSource(source: ModelSource<string | null>, out: string, opts: ExportModelOptions = {}): Promise<ExportedModel> {
  const w = source.weights;
  const tokenizerDir = source.tokenizerDir ?? undefined;
  if (w.kind === 'full') {
    const ckpt = openCheckpoint(w.dir);
    try {
      const dtype = opts.dtype ?? storedDtype(ckpt);
      await exportCheckpoint(out, ckpt.config, ckpt.tensors(), { dtype, tokenizerDir, generationConfig: ckpt.generationConfig ?? undefined });
      return { dir: out, what: 'model', dtype };
    } finally {
      ckpt.close();
    }
  }
  if (opts.merge) {
    const base = openCheckpoint(w.basePath);
    const dtype = opts.dtype ?? storedDtype(base);
    const generationConfig = base.generationConfig ?? undefined;
    base.close();
    const model = loadModelSource(source);
    mergeLora(model);
    try {
      await saveModel(model, out, { dtype, tokenizerDir, generationConfig });
    } finally {
      for (const p of model.parameters()) p.dispose();
    }
    return { dir: out, what: 'merged', dtype };
  }
  if (opts.dtype) throw new Error(`--dtype: ${source.input} is a LoRA adapter, kept as trained; pass --merge to write the merged model in ${opts.dtype}`);
  await replaceDirAtomic(out, (tmp) => {
    const copy = (from: string, f: string) => storage().writeAtomic(path.join(tmp, f), storage().readBytes(path.join(from, f)));
    for (const f of [ADAPTER_CONFIG, ADAPTER_WEIGHTS]) copy(w.adapterDir, f);
    if (tokenizerDir) for (const f of TOKENIZER_FILES) if (storage().exists(path.join(tokenizerDir, f))) copy(tokenizerDir, f);
  });
  return { dir: out, what: 'adapter', dtype: null };
}
