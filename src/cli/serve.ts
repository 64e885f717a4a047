import { defineCommand } from 'citty';
import { existsSync } from 'node:fs';
import * as path from 'node:path';
import { initRuntime } from '../gpu/runtime.ts';
import { loadModelSource, resolveModelSource } from '../checkpoint/model_source.ts';
import { hubModelDir } from '../hub/hub_model.ts';
import { loadTokenizer, type Tokenizer } from '../tokenizer/tokenizer.ts';
import { LocalEngine } from '../engines/local_engine.ts';
import { SERVER_DEFAULTS, startServer } from '../serve/server.ts';
import { CliError, intArg } from './args.ts';
import { gpuArgs, gpuMemoryBytes, gpuOptions } from './gpu_args.ts';

function adapterArgs(spec: string | undefined): [string, string][] {
  if (!spec) return [];
  return spec.split(',').map((s) => {
    const eq = s.indexOf('=');
    if (eq <= 0 || eq === s.length - 1) throw new CliError(`--lora ${spec}: expected name=dir[,name=dir...]`);
    return [s.slice(0, eq).trim(), s.slice(eq + 1).trim()];
  });
}

export const serveCommand = defineCommand({
  meta: { name: 'serve', description: 'Serve a model over a vLLM-compatible HTTP API (completions and chat, streaming, log-probs, LoRA adapters, weight reload)' },
  args: {
    model: { type: 'positional', description: 'model directory, training checkpoint (ckpt-N), run directory (its latest checkpoint) or Hub model id (owner/name)', required: true },
    tokenizer: { type: 'string', description: "tokenizer directory (default: the model's, when it has tokenizer.json)" },
    'served-model-name': { type: 'string', description: 'name clients put in "model" (default: the model path as given)' },
    host: { type: 'string', description: 'address to bind', default: SERVER_DEFAULTS.host },
    port: { type: 'string', description: 'port', default: String(SERVER_DEFAULTS.port) },
    'api-key': { type: 'string', description: 'require "Authorization: Bearer <key>" (env WGT_API_KEY)' },
    'allowed-root': { type: 'string', description: 'directory under which adapter and checkpoint paths in requests must lie (none: such requests are refused)' },
    lora: { type: 'string', description: 'adapters to load at start: name=dir[,name=dir...]' },
    'max-batch': { type: 'string', description: 'rows per generation batch', default: '64' },
    'max-body-bytes': { type: 'string', description: 'request size cap', default: String(SERVER_DEFAULTS.maxBodyBytes) },
    'max-logprobs': { type: 'string', description: 'most top log-probs a request may ask for per token', default: String(SERVER_DEFAULTS.maxLogprobs) },
    'disable-access-log': { type: 'boolean', description: 'do not print a line for each request answered (as vLLM\'s --disable-uvicorn-access-log)' },
    ...gpuArgs,
  },
  async run({ args }) {
    const source = resolveModelSource(await hubModelDir(args.model), 'MODEL', { tokenizer: 'optional' });
    const tokDir = args.tokenizer ?? source.tokenizerDir;
    const port = intArg('--port', args.port, 0, 65535);
    const maxBatch = intArg('--max-batch', args['max-batch'], 1);
    const maxBodyBytes = intArg('--max-body-bytes', args['max-body-bytes'], 1024);
    const maxLogprobs = intArg('--max-logprobs', args['max-logprobs'], 0);
    const adapters = adapterArgs(args.lora);
    if (args['allowed-root'] && !existsSync(args['allowed-root'])) throw new CliError(`--allowed-root ${args['allowed-root']}: no such directory`);
    const rt = await initRuntime(gpuOptions(args));
    const budget = gpuMemoryBytes(args);
    if (budget !== undefined) rt.pool.limit = budget;
    const tokenizer: Tokenizer | null = tokDir ? await loadTokenizer(tokDir) : null;
    const model = loadModelSource(source, 'MODEL');
    const weights = source.weights.kind === 'full' ? source.weights.dir : source.weights.adapterDir;
    const engine = new LocalEngine(model, { tokenizer, name: args['served-model-name'] ?? args.model, path: path.resolve(weights), maxBatch });
    for (const [name, dir] of adapters) await engine.loadLoraAdapter(name, dir);
    const handle = await startServer(engine, {
      host: args.host,
      port,
      apiKey: args['api-key'] ?? process.env.WGT_API_KEY ?? null,
      allowedRoot: args['allowed-root'] ?? null,
      maxBodyBytes,
      maxLogprobs,
      maxQueuedRows: Math.max(maxBatch, SERVER_DEFAULTS.maxQueuedRows),
      accessLog: args['disable-access-log'] ? null : (line) => console.log(line),
    });
    console.log(`serving ${engine.name}${tokenizer ? '' : ' (no tokenizer: token ids only)'} at ${handle.url}`);
    const stop = async () => {
      await handle.close();
      process.exit(0);
    };
    process.on('SIGINT', stop);
    process.on('SIGTERM', stop);
  },
});
