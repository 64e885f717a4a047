// The float types a command can write weights in, as users spell them.

import type { StorageDType } from '../safetensors/writer.ts';
import { CliError } from './args.ts';

const DTYPES: Record<string, StorageDType> = { bf16: 'BF16', f16: 'F16', f32: 'F32' };

export function dtypeArg(flag: string, value: string | undefined): StorageDType | undefined {
  if (value === undefined) return undefined;
  const dtype = DTYPES[value.toLowerCase()];
  if (!dtype) throw new CliError(`${flag} ${value}: expected bf16, f16 or f32`);
  return dtype;
}
