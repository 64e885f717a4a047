// Supervised fine-tuning on expert (or recorded) trajectories, run by the SFT loop
// with the RL runs' outputs so the two compare side by side.

import { z } from 'zod';
import { defineMethod } from '../method.ts';
import { posInt } from '../options.ts';

export const sft = defineMethod({
  name: 'sft',
  summary: 'supervised fine-tuning on expert (or recorded) trajectories',
  options: z.strictObject({
    /** JSONL of trajectory records to imitate; unset generates them with the environment's expert. */
    data: z.string().min(1).optional(),
    /** Expert episodes per epoch when generating. */
    episodes: posInt.default(64),
    epochs: posInt.default(1),
  }),
  loop: 'sft',
});
