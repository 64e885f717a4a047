// A stand-in for vLLM's OpenAI-compatible server (`vllm serve`) as the trainer meets
// it, written from vllm-project/vllm's source: the API-key middleware
// (entrypoints/serve/middleware/authenticate.py: only paths under /v1, /v2,
// /inference and /cohere are guarded; 401 {"error": "Unauthorized"}), /v1/models
// (models/serving.py: the base model's card with max_model_len and root, adapters with
// root = their path and parent = the base), the model check (404 "The model `x` does
// not exist."), the context check (renderers/params.py: prompt tokens past
// max_model_len - max_tokens are a 400), the runtime LoRA routes mounted only with
// VLLM_ALLOW_RUNTIME_LORA_UPDATING (lora/api_router.py, their validation and
// messages), the development routes /collective_rpc and /reset_prefix_cache mounted
// only with VLLM_SERVER_DEV_MODE (dev/rpc/api_router.py), FastAPI's 404 {"detail":
// "Not Found"} for a route that is not mounted, and a worker whose reload_weights
// takes weights_path (vLLM 0.16 and later) or none (earlier: a TypeError, answered
// 500). Errors have vLLM's shape {"error": {"message", "type", "param", "code"}}.
//
// Generation, scoring, adapters and reloads run on the project's own `serve` behind
// it, so token-in/token-out is real. A restart is what a real one does to the
// trainer: the port refuses connections for a while, then the server is back on its
// base weights with every adapter forgotten; a crash can be set to follow the answer
// to a given request. Every request is recorded, so a test checks from the server's
// side which weights served what.

import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { LocalEngine } from '../../src/engines/local_engine.ts';
import { startServer, type ServerHandle } from '../../src/serve/server.ts';

export interface VllmStandinOptions {
  /** The base model directory the server was started on (a restart reloads it). */
  modelDir: string;
  /** --served-model-name. */
  servedModelName: string;
  /** --max-model-len (default: the model's max_position_embeddings). */
  maxModelLen?: number;
  /** --api-key. */
  apiKey?: string;
  /** VLLM_SERVER_DEV_MODE=1. */
  devMode?: boolean;
  /** VLLM_ALLOW_RUNTIME_LORA_UPDATING=True. */
  runtimeLora?: boolean;
  /** The worker's reload_weights takes weights_path (vLLM 0.16 and later); false: an earlier vLLM. */
  reloadTakesPath?: boolean;
  /** Where adapter and checkpoint paths may lie (the inner server's --allowed-root). */
  allowedRoot: string;
}

/** One request as the server saw it. */
export interface SeenRequest {
  method: string;
  path: string;
  /** The "model" a completion asked for. */
  model?: string;
  /** A scoring request (prompt_logprobs) rather than a generation. */
  scoring?: boolean;
  /** The adapters loaded when it arrived. */
  adapters: string[];
  /** Where the base weights it met came from (the model directory, or the last reload's). */
  weights: string | null;
  status: number;
  /** When it arrived (performance.now()), to order requests across servers. */
  at: number;
}

export interface VllmStandin {
  readonly url: string;
  readonly seen: SeenRequest[];
  /** Adapters the server fails to load (answered 500, as vLLM answers a load that raises), by name; null: none. */
  refuseLoad: ((name: string) => boolean) | null;
  /** A crash right after the answer to a request: the milliseconds the server is then down for (see restart), or null to go on. */
  crashAfter: ((r: SeenRequest) => number | null) | null;
  /** Adapters loaded now, by name. */
  adapters(): string[];
  /** The checkpoint the base weights were last loaded from. */
  basePath(): string | null;
  /** Stops answering (connections refused) for `downMs`, then comes back as a fresh process would: base weights, no adapters; `seen` gets a {method: 'RESTARTED'} entry then. */
  restart(downMs: number): Promise<void>;
  close(): Promise<void>;
}

const GUARDED_PREFIXES = ['/v1', '/v2', '/inference', '/cohere'];

function errorBody(message: string, type: string, code: number, param: string | null = null) {
  return { error: { message, type, param, code } };
}

function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    let text = '';
    req.setEncoding('utf8');
    req.on('data', (d) => (text += d));
    req.on('end', () => resolve(text));
    req.on('error', reject);
  });
}

function send(res: ServerResponse, status: number, body: unknown): void {
  const text = typeof body === 'string' ? body : JSON.stringify(body);
  res.writeHead(status, { 'content-type': typeof body === 'string' ? 'text/plain; charset=utf-8' : 'application/json' });
  res.end(text);
}

export async function startVllmStandin(engine: LocalEngine, o: VllmStandinOptions): Promise<VllmStandin> {
  const inner: ServerHandle = await startServer(engine, { allowedRoot: o.allowedRoot, port: 0 });
  const maxModelLen = o.maxModelLen ?? engine.models.config.maxPositions;
  const created = Math.floor(Date.now() / 1000);
  // vLLM's own record of the adapters (OpenAIServingModels.lora_requests): name -> path.
  const loras = new Map<string, string>();
  const seen: SeenRequest[] = [];
  // The record of the request each answer is for, for crashAfter.
  const answered = new WeakMap<ServerResponse, SeenRequest>();
  const weights = () => engine.models.list()[0].path;

  const forward = async (path: string, body: string): Promise<{ status: number; text: string; type: string }> => {
    const res = await fetch(`${inner.url}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
    return { status: res.status, text: await res.text(), type: res.headers.get('content-type') ?? 'application/json' };
  };
  const relay = (res: ServerResponse, r: { status: number; text: string; type: string }) => {
    res.writeHead(r.status, { 'content-type': r.type });
    res.end(r.text);
  };

  const models = () => ({
    object: 'list',
    data: [
      { id: o.servedModelName, object: 'model', created, owned_by: 'vllm', root: o.modelDir, parent: null, max_model_len: maxModelLen, permission: [{}] },
      ...[...loras].map(([id, root]) => ({ id, object: 'model', created, owned_by: 'vllm', root, parent: o.servedModelName, max_model_len: null, permission: [{}] })),
    ],
  });

  const route = async (req: IncomingMessage, res: ServerResponse): Promise<number> => {
    const path = new URL(req.url ?? '/', 'http://x').pathname;
    const method = req.method ?? 'GET';
    const text = method === 'POST' ? await readBody(req) : '';
    if (o.apiKey && GUARDED_PREFIXES.some((p) => path.startsWith(p)) && req.headers.authorization !== `Bearer ${o.apiKey}`) {
      send(res, 401, { error: 'Unauthorized' });
      return 401;
    }
    const json = (): Record<string, unknown> | null => {
      try {
        const v = JSON.parse(text);
        return v !== null && typeof v === 'object' && !Array.isArray(v) ? v : null;
      } catch {
        return null;
      }
    };
    const notFound = () => {
      send(res, 404, { detail: 'Not Found' });
      return 404;
    };
    if (method === 'GET' && path === '/health') {
      res.writeHead(200).end();
      return 200;
    }
    if (method === 'GET' && path === '/v1/models') {
      send(res, 200, models());
      return 200;
    }
    if (method !== 'POST') return notFound();
    // Takes no body (dev/cache/api_router.py reads only the query).
    if (path === '/reset_prefix_cache') {
      if (!o.devMode) return notFound();
      res.writeHead(200).end();
      return 200;
    }
    const body = json();
    if (body === null) {
      send(res, 400, errorBody('JSON decode error', 'BadRequestError', 400));
      return 400;
    }
    switch (path) {
      case '/v1/completions': {
        const model = body.model;
        const record: SeenRequest = { method, path, model: typeof model === 'string' ? model : undefined, scoring: body.prompt_logprobs !== undefined, adapters: [...loras.keys()], weights: weights(), status: 0, at: performance.now() };
        seen.push(record);
        answered.set(res, record);
        if (typeof model === 'string' && model !== o.servedModelName && !loras.has(model)) {
          send(res, 404, errorBody(`The model \`${model}\` does not exist.`, 'NotFoundError', 404, 'model'));
          return (record.status = 404);
        }
        const prompt = body.prompt;
        const maxTokens = typeof body.max_tokens === 'number' ? body.max_tokens : 16;
        if (Array.isArray(prompt) && prompt.every((t) => typeof t === 'number') && prompt.length > maxModelLen - maxTokens) {
          send(res, 400, errorBody(
            `You passed ${prompt.length} input tokens and requested ${maxTokens} output tokens. However, the model's context length is only ${maxModelLen} tokens, ` +
            `resulting in a maximum input length of ${maxModelLen - maxTokens} tokens. Please reduce the length of the input prompt.`,
            'BadRequestError', 400, 'input_tokens',
          ));
          return (record.status = 400);
        }
        const r = await forward(path, text);
        relay(res, r);
        return (record.status = r.status);
      }
      case '/tokenize':
      case '/detokenize': {
        const r = await forward(path, text);
        relay(res, r);
        return r.status;
      }
      case '/v1/load_lora_adapter': {
        if (!o.runtimeLora) return notFound();
        const name = body.lora_name;
        const dir = body.lora_path;
        const record: SeenRequest = { method, path, model: typeof name === 'string' ? name : undefined, adapters: [...loras.keys()], weights: weights(), status: 0, at: performance.now() };
        seen.push(record);
        answered.set(res, record);
        if (typeof name !== 'string' || typeof dir !== 'string' || !name || !dir) {
          send(res, 400, errorBody("Both 'lora_name' and 'lora_path' must be provided.", 'InvalidUserInput', 400));
          return 400;
        }
        if (loras.has(name) && body.load_inplace !== true) {
          send(res, 400, errorBody(`The lora adapter '${name}' has already been loaded. If you want to load the adapter in place, set 'load_inplace' to True.`, 'InvalidUserInput', 400));
          return 400;
        }
        if (handle.refuseLoad?.(name)) {
          send(res, 500, errorBody(`Failed to load the LoRA adapter '${name}' (refused by the test)`, 'InternalServerError', 500));
          return (record.status = 500);
        }
        const r = await forward(path, JSON.stringify({ lora_name: name, lora_path: dir }));
        if (r.status !== 200) {
          send(res, 500, errorBody(JSON.parse(r.text).error?.message ?? r.text, 'InternalServerError', 500));
          return (record.status = 500);
        }
        loras.set(name, dir);
        send(res, 200, `Success: LoRA adapter '${name}' added successfully.`);
        return (record.status = 200);
      }
      case '/v1/unload_lora_adapter': {
        if (!o.runtimeLora) return notFound();
        const name = body.lora_name;
        const record: SeenRequest = { method, path, model: typeof name === 'string' ? name : undefined, adapters: [...loras.keys()], weights: weights(), status: 0, at: performance.now() };
        seen.push(record);
        answered.set(res, record);
        if (typeof name !== 'string' || !name) {
          send(res, 400, errorBody("'lora_name' needs to be provided to unload a LoRA adapter.", 'InvalidUserInput', 400));
          return 400;
        }
        if (!loras.has(name)) {
          send(res, 404, errorBody(`The lora adapter '${name}' cannot be found.`, 'NotFoundError', 404));
          return 404;
        }
        await forward(path, JSON.stringify({ lora_name: name }));
        loras.delete(name);
        send(res, 200, `Success: LoRA adapter '${name}' removed successfully.`);
        return (record.status = 200);
      }
      case '/collective_rpc': {
        if (!o.devMode) return notFound();
        seen.push({ method, path, adapters: [...loras.keys()], weights: weights(), status: 0, at: performance.now() });
        if (body.method === undefined || body.method === null) {
          send(res, 400, { detail: "Missing 'method' in request body" });
          return 400;
        }
        const kwargs = (body.kwargs ?? {}) as Record<string, unknown>;
        if (body.method === 'reload_weights' && !o.reloadTakesPath && Object.keys(kwargs).length) {
          const arg = Object.keys(kwargs)[0];
          send(res, 500, errorBody(`Worker.reload_weights() got an unexpected keyword argument '${arg}'`, 'InternalServerError', 500));
          return 500;
        }
        const r = await forward(path, text);
        relay(res, r);
        return r.status;
      }
      default:
        return notFound();
    }
  };

  let front: Server = createServer();
  const open = async (port: number) => {
    front = createServer((req, res) => {
      // A crash once the answer has left, as a process dying right after it replied.
      res.on('finish', () => {
        const record = answered.get(res);
        const downMs = record ? handle.crashAfter?.(record) : null;
        if (downMs !== null && downMs !== undefined) void handle.restart(downMs);
      });
      route(req, res).catch((e: unknown) => send(res, 500, errorBody(String((e as Error)?.message ?? e), 'InternalServerError', 500)));
    });
    await new Promise<void>((resolve) => front.listen(port, '127.0.0.1', resolve));
    return (front.address() as AddressInfo).port;
  };
  const shut = () =>
    new Promise<void>((resolve) => {
      front.close(() => resolve());
      front.closeAllConnections();
    });
  const port = await open(0);
  const url = `http://127.0.0.1:${port}`;

  const handle: VllmStandin = {
    url,
    seen,
    refuseLoad: null,
    crashAfter: null,
    adapters: () => [...loras.keys()],
    basePath: () => engine.models.list()[0].path,
    async restart(downMs: number) {
      await shut();
      // What a new process loads: the model it was started on, no adapters.
      for (const name of [...loras.keys()]) await engine.unloadLoraAdapter(name);
      loras.clear();
      await engine.reloadWeights(o.modelDir);
      await new Promise((r) => setTimeout(r, downMs));
      await open(port);
      seen.push({ method: 'RESTARTED', path: '', adapters: [], weights: weights(), status: 0, at: performance.now() });
    },
    async close() {
      await shut();
      await inner.close();
    },
  };
  return handle;
}
