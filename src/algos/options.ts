// Number shapes the configuration's schemas share.

import { z } from 'zod';

export const posInt = z.int().min(1);
export const nonNegInt = z.int().min(0);
export const posNum = z.number().gt(0);
export const nonNegNum = z.number().min(0);
export const prob = z.number().min(0).max(1);
