// Where the Hugging Face Hub is and who the user is on it, read from the environment as
// huggingface_hub reads it, so that one setting serves this trainer, transformers and
// vLLM alike: HF_ENDPOINT, HF_HUB_OFFLINE, HF_TOKEN (else the token file that `hf auth
// login` writes: HF_TOKEN_PATH, or HF_HOME/token), and the cache (HF_HUB_CACHE, else
// HF_HOME/hub, as @huggingface/hub's getHFHubCachePath reads them).

import * as path from '../storage/paths.ts';
import { hostProcess, storage } from '../storage/storage.ts';
import { getHFHubCachePath } from '@huggingface/hub';
import { HubError } from './hub_errors.ts';

export const DEFAULT_ENDPOINT = 'https://huggingface.co';

type Env = Readonly<Record<string, string | undefined>>;

export function hubEndpoint(env: Env = hostProcess().env): string {
  return (env.HF_ENDPOINT || DEFAULT_ENDPOINT).replace(/\/+$/, '');
}

/** HF_HUB_OFFLINE as huggingface_hub reads a boolean: 1, on, yes or true, in any case. */
export function hubOffline(env: Env = hostProcess().env): boolean {
  return ['1', 'ON', 'YES', 'TRUE'].includes((env.HF_HUB_OFFLINE ?? '').trim().toUpperCase());
}

export function hubCacheDir(): string {
  return getHFHubCachePath();
}

function hfHome(env: Env): string {
  return env.HF_HOME ?? path.join(env.XDG_CACHE_HOME ?? path.join(hostProcess().homeDir, '.cache'), 'huggingface');
}

/** The token file `hf auth login` writes. */
export function tokenPath(env: Env = hostProcess().env): string {
  return env.HF_TOKEN_PATH ?? path.join(hfHome(env), 'token');
}

/** The user's token, or undefined when there is none (public models need none). */
export function hubToken(env: Env = hostProcess().env): string | undefined {
  const file = tokenPath(env);
  const fromEnv = env.HF_TOKEN?.trim();
  const token = fromEnv || (storage().exists(file) ? storage().readText(file).trim() : '') || undefined;
  // @huggingface/hub throws a TypeError for anything else, which would read as a bug.
  if (token && !token.startsWith('hf_')) throw new HubError(`${fromEnv ? 'HF_TOKEN' : file}: not a Hugging Face access token (they start with hf_)`);
  return token;
}
