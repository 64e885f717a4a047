// Our vLLM-compatible generation server (docs/PROTOCOLS.md section 5, docs/SERVING.md) over
// a LocalEngine:
//   POST /v1/completions and /v1/chat/completions (whole or streamed), GET /v1/models,
//   GET /health, POST /tokenize, /detokenize, /v1/load_lora_adapter,
//   /v1/unload_lora_adapter, and of vLLM's development endpoints the ones a trainer's
//   weight sync uses: POST /collective_rpc (method "reload_weights") and
//   /reset_prefix_cache.
// One GPU, so work goes through one queue (scheduler.ts) that merges concurrent
// generation requests into shared batches. Bound to 127.0.0.1 unless told otherwise;
// an optional bearer token guards everything but /health; paths in requests must lie
// under --allowed-root. Bad input gets a 4xx in vLLM's error shape and never takes the
// server down. Built on node:http so it runs unchanged on Bun, Deno and Node.

import { listen } from '../net/listen.ts';
import { createServer, STATUS_CODES, type IncomingMessage, type ServerResponse } from '../net/http_server.ts';
import { storage } from '../storage/storage.ts';
import { CheckpointError, ConfigError } from '../hf_model/errors.ts';
import { SafetensorsError } from '../safetensors/errors.ts';
import { TokenizerError } from '../tokenizer/tokenizer.ts';
import { EngineRequestError } from '../engines/errors.ts';
import type { LocalEngine } from '../engines/local_engine.ts';
import type { PromptTokenStats } from '../engines/prompt_logprobs.ts';
import { chatResponse, ChatChunks, parseChat } from './chat.ts';
import { CompletionChunks, completionResponse, parseCompletion } from './completions.ts';
import { boolField, requiredString, stringField, tokenIds, type Body } from './fields.ts';
import { ApiError, readJsonObject, sendJson, sendText } from './http.ts';
import { allowedDir } from './paths.ts';
import type { RequestLimits, SamplingRequest } from './sampling.ts';
import { BatchScheduler } from './scheduler.ts';
import { ChoiceText, streamChoices, type ChunkFormat } from './stream.ts';

export interface ServerOptions {
  host?: string;
  /** 0 picks a free port. */
  port?: number;
  /** Bearer token every request but GET /health must carry. */
  apiKey?: string | null;
  /** Directory under which adapter and checkpoint paths must lie; none: such requests are refused. */
  allowedRoot?: string | null;
  maxBodyBytes?: number;
  /** Choices one completion request may ask for. */
  maxChoices?: number;
  /** Top log-probs one token may ask for (vLLM's --max-logprobs). */
  maxLogprobs?: number;
  /** Rows of concurrent requests merged into one engine call. */
  maxQueuedRows?: number;
  /** Where each request's line goes once it is answered, as vLLM's (uvicorn's) access log writes it; none: not logged. */
  accessLog?: ((line: string) => void) | null;
}

export interface ServerHandle {
  /** "http://127.0.0.1:8000" */
  readonly url: string;
  readonly port: number;
  /** Engine batches run and requests they carried. */
  stats(): { batches: number; requests: number };
  close(): Promise<void>;
}

export const SERVER_DEFAULTS = {
  host: '127.0.0.1',
  port: 8000,
  maxBodyBytes: 32 * 2 ** 20,
  maxChoices: 4096,
  maxLogprobs: 20,
  maxQueuedRows: 1024,
  accessLog: null,
} as const;

/** Engine and checkpoint errors the client caused become 4xx; the rest are ours (500). */
function apiError(e: unknown): ApiError {
  if (e instanceof ApiError) return e;
  if (e instanceof EngineRequestError) return new ApiError(e.kind === 'not_found' ? 404 : 400, e.message);
  if (e instanceof CheckpointError || e instanceof ConfigError || e instanceof SafetensorsError || e instanceof TokenizerError) return new ApiError(400, e.message);
  return new ApiError(500, `internal error: ${(e as Error)?.message ?? String(e)}`);
}

/** A client address as uvicorn's access log writes it (IPv4-mapped IPv6 addresses as IPv4). */
function hostPort(address: string | undefined, port: number | undefined): string {
  const host = (address ?? '-').replace(/^::ffff:/, '');
  return `${host.includes(':') ? `[${host}]` : host}:${port ?? '-'}`;
}

/** Compares in time that depends on the lengths alone, so the answer's timing does not tell how much of a key was right. */
function sameSecret(given: string, expected: string): boolean {
  const a = new TextEncoder().encode(given);
  const b = new TextEncoder().encode(expected);
  if (a.length !== b.length) return false;
  let differ = 0;
  for (let i = 0; i < a.length; i++) differ |= a[i] ^ b[i];
  return differ === 0;
}

export async function startServer(engine: LocalEngine, options: ServerOptions = {}): Promise<ServerHandle> {
  const opts = { ...SERVER_DEFAULTS, ...options };
  const root = opts.allowedRoot ? storage().realPath(opts.allowedRoot) : null;
  const scheduler = new BatchScheduler(engine, opts.maxQueuedRows);
  const tok = engine.tokenizer;
  const config = engine.models.config;
  const created = Math.floor(Date.now() / 1000);

  const limits: RequestLimits = { vocab: config.vocabSize, maxModelLen: config.maxPositions, maxChoices: opts.maxChoices, maxLogprobs: opts.maxLogprobs };
  const newId = (prefix: string) => `${prefix}-${crypto.randomUUID().replaceAll('-', '')}`;

  const stream = (res: ServerResponse, model: string | undefined, c: SamplingRequest, format: ChunkFormat, promptStats: readonly PromptTokenStats[] | null) =>
    streamChoices(res, {
      requests: c.requests,
      n: c.n,
      options: c.stream!,
      texts: c.requests.map(() => new ChoiceText(tok, c)),
      promptStats,
      run: (onToken) => scheduler.generate(model, c.requests, onToken),
      toApiError: apiError,
    }, format);

  const completions = async (body: Body, res: ServerResponse): Promise<void> => {
    const c = parseCompletion(body, tok, limits);
    engine.models.resolve(c.model);
    const id = newId('cmpl');
    const modelName = c.model ?? engine.name;
    const promptStats = () => scheduler.exclusive(() => engine.promptLogprobs(c.prompts, { model: c.model, temperature: c.promptTemperature, top: c.promptTop }));
    if (c.stream) return stream(res, c.model, c, new CompletionChunks(c, id, modelName, tok), c.promptLogprobs ? await promptStats() : null);
    const [results, stats] = await Promise.all([scheduler.generate(c.model, c.requests), c.promptLogprobs ? promptStats() : null]);
    sendJson(res, 200, completionResponse(c, id, modelName, results, stats, tok));
  };

  const chat = async (body: Body, res: ServerResponse): Promise<void> => {
    const c = parseChat(body, tok, limits);
    engine.models.resolve(c.model);
    const id = newId('chatcmpl');
    const modelName = c.model ?? engine.name;
    if (c.stream) return stream(res, c.model, c, new ChatChunks(c, id, modelName, tok), null);
    sendJson(res, 200, chatResponse(c, id, modelName, await scheduler.generate(c.model, c.requests), tok));
  };

  const models = (): unknown => ({
    object: 'list',
    data: engine.models.list().map((m) => ({
      id: m.id, object: 'model', created, owned_by: 'wgt', root: m.path ?? m.id, parent: m.parent, max_model_len: config.maxPositions,
    })),
  });

  const tokenize = (body: Body): unknown => {
    if (!tok) throw new ApiError(400, 'this server has no tokenizer loaded (start it with --tokenizer)');
    const addSpecial = boolField(body, 'add_special_tokens', true);
    let tokens: number[];
    if (body.messages !== undefined) {
      const messages = body.messages;
      if (!Array.isArray(messages) || messages.some((m) => typeof m?.role !== 'string' || typeof m?.content !== 'string')) {
        throw new ApiError(400, 'field "messages" must be a list of {"role": string, "content": string}', 'messages');
      }
      tokens = tok.applyChatTemplate(messages, { tokenize: true, addGenerationPrompt: boolField(body, 'add_generation_prompt', true) });
    } else {
      tokens = tok.encode(requiredString(body, 'prompt'), { addSpecialTokens: addSpecial });
    }
    return { count: tokens.length, max_model_len: config.maxPositions, tokens };
  };

  const detokenize = (body: Body): unknown => {
    if (!tok) throw new ApiError(400, 'this server has no tokenizer loaded (start it with --tokenizer)');
    return { prompt: tok.decode(tokenIds(body.tokens, 'tokens', config.vocabSize)) };
  };

  const loadAdapter = async (body: Body): Promise<string> => {
    const name = requiredString(body, 'lora_name');
    const dir = allowedDir(requiredString(body, 'lora_path'), 'lora_path', root);
    await scheduler.exclusive(() => engine.loadLoraAdapter(name, dir));
    return `Success: LoRA adapter '${name}' added successfully.`;
  };

  const unloadAdapter = async (body: Body): Promise<string> => {
    const name = requiredString(body, 'lora_name');
    await scheduler.exclusive(() => engine.unloadLoraAdapter(name));
    return `Success: LoRA adapter '${name}' removed successfully.`;
  };

  // vLLM's POST /collective_rpc calls a method on every worker; of its worker methods
  // we have reload_weights (from weights_path, or again from where the weights came).
  const collectiveRpc = async (body: Body): Promise<unknown> => {
    const method = requiredString(body, 'method');
    if (method !== 'reload_weights') throw new ApiError(400, `collective_rpc method "${method}" is not supported by this server (it has "reload_weights")`, 'method');
    const args = body.args;
    if (args !== undefined && args !== null && !(Array.isArray(args) && args.length === 0)) {
      throw new ApiError(400, 'collective_rpc reload_weights takes no positional "args" here (weights come from disk); pass {"kwargs": {"weights_path": "<dir>"}}', 'args');
    }
    const kwargs = body.kwargs ?? {};
    if (typeof kwargs !== 'object' || Array.isArray(kwargs)) throw new ApiError(400, 'field "kwargs" must be an object', 'kwargs');
    const kw = kwargs as Body;
    const unknown = Object.keys(kw).filter((k) => k !== 'weights_path' && k !== 'is_checkpoint_format');
    if (unknown.length) throw new ApiError(400, `collective_rpc reload_weights: unsupported kwargs ${unknown.map((k) => JSON.stringify(k)).join(', ')} (it takes "weights_path")`, 'kwargs');
    if (boolField(kw, 'is_checkpoint_format', true) !== true) throw new ApiError(400, 'collective_rpc reload_weights: only checkpoint-format weights (is_checkpoint_format true) are supported', 'kwargs');
    const given = stringField(kw, 'weights_path');
    const current = engine.models.list()[0].path;
    if (given === undefined && current === null) throw new ApiError(400, 'collective_rpc reload_weights: no "weights_path" given, and this server does not know where its weights came from', 'kwargs');
    const dir = allowedDir(given ?? current!, 'weights_path', root);
    await scheduler.exclusive(() => engine.reloadWeights(dir));
    return { results: [null] };
  };

  const authorized = (req: IncomingMessage): boolean => {
    if (!opts.apiKey) return true;
    const h = req.headers.authorization ?? '';
    return h.startsWith('Bearer ') && sameSecret(h.slice(7), opts.apiKey);
  };

  const route = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const path = new URL(req.url ?? '/', 'http://localhost').pathname;
    const method = req.method ?? 'GET';
    const only = (m: string) => {
      if (method !== m) {
        res.setHeader('allow', m);
        throw new ApiError(405, `${method} ${path} is not allowed (use ${m})`);
      }
    };
    if (path === '/health') {
      only('GET');
      return sendJson(res, 200, { status: 'ok', queued: scheduler.pending });
    }
    if (!authorized(req)) throw new ApiError(401, 'missing or wrong API key: send "Authorization: Bearer <key>"');
    const body = () => readJsonObject(req, opts.maxBodyBytes);
    switch (path) {
      case '/v1/models':
        only('GET');
        return sendJson(res, 200, models());
      case '/v1/completions':
        only('POST');
        return completions(await body(), res);
      case '/v1/chat/completions':
        only('POST');
        return chat(await body(), res);
      case '/tokenize':
        only('POST');
        return sendJson(res, 200, tokenize(await body()));
      case '/detokenize':
        only('POST');
        return sendJson(res, 200, detokenize(await body()));
      case '/v1/load_lora_adapter':
        only('POST');
        return sendText(res, 200, await loadAdapter(await body()));
      case '/v1/unload_lora_adapter':
        only('POST');
        return sendText(res, 200, await unloadAdapter(await body()));
      case '/collective_rpc':
        only('POST');
        return sendJson(res, 200, await collectiveRpc(await body()));
      case '/reset_prefix_cache':
        // We keep no KV cache across requests, so nothing can hold the old weights' keys.
        only('POST');
        return sendText(res, 200, '');
      default:
        throw new ApiError(404, `no route ${method} ${path}`);
    }
  };

  const server = createServer((req, res) => {
    const log = opts.accessLog;
    if (log) {
      res.on('finish', () => log(`INFO:     ${hostPort(req.socket.remoteAddress, req.socket.remotePort)} - "${req.method} ${req.url} HTTP/${req.httpVersion}" ${res.statusCode} ${STATUS_CODES[res.statusCode] ?? ''}`.trimEnd()));
    }
    route(req, res).catch((e: unknown) => {
      const err = apiError(e);
      // What is left of a refused body is not worth reading on a kept-alive connection.
      const headers: Record<string, string> = err.status === 413 || err.status === 401 ? { connection: 'close' } : {};
      sendJson(res, err.status, err.body, headers);
    });
  });
  server.on('clientError', (_err, socket) => {
    if (socket.writable) socket.end('HTTP/1.1 400 Bad Request\r\nconnection: close\r\ncontent-length: 0\r\n\r\n');
    else socket.destroy();
  });

  const { port, origin } = await listen(server, opts.port, opts.host);
  return {
    url: origin,
    port,
    stats: () => ({ ...scheduler.stats }),
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections?.();
      }),
  };
}
