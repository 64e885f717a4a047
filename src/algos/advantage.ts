// GRPO advantages over step-samples (docs/ALGORITHMS.md section 1): within
// each group, every turn-sample's score is standardised against all turn-samples of
// the group (not the G trajectories): A = (score - mean) / (std + 1e-6), std unbiased
// (n - 1); a group of one sample gets mean 0 and std 1. A is broadcast to every
// token of the sample by the loss.

export interface Scored {
  groupId: string;
  score: number;
}

export const ADVANTAGE_EPS = 1e-6;

export function groupAdvantages(samples: readonly Scored[]): Float64Array {
  const groups = new Map<string, number[]>();
  samples.forEach((s, i) => {
    const g = groups.get(s.groupId);
    if (g) g.push(i);
    else groups.set(s.groupId, [i]);
  });
  const adv = new Float64Array(samples.length);
  for (const idx of groups.values()) {
    const n = idx.length;
    let mean = 0;
    let std = 1;
    if (n > 1) {
      mean = idx.reduce((a, i) => a + samples[i].score, 0) / n;
      std = Math.sqrt(idx.reduce((a, i) => a + (samples[i].score - mean) ** 2, 0) / (n - 1));
    }
    for (const i of idx) adv[i] = (samples[i].score - mean) / (std + ADVANTAGE_EPS);
  }
  return adv;
}
