// The page's recipe from its address: short names for the settings a person changes
// most (?iterations=2&method=sdar&tasks=2&groupSize=2&maxTurns=2), any other setting by
// its config path (?optim.lr=1e-3), as `train`'s key=value overrides of the embedded
// default. `resume=1` continues the run kept in the page's storage.

export const SHORT_NAMES: Readonly<Record<string, string>> = {
  iterations: 'iterations',
  method: 'method',
  tasks: 'rollout.tasksPerIteration',
  groupSize: 'rollout.groupSize',
  maxTurns: 'rollout.maxTurns',
  maxTokens: 'rollout.maxResponseTokens',
  seed: 'seed',
  lr: 'optim.lr',
  gpuMemory: 'gpu.memory',
};

export interface PageRecipe {
  /** key=value overrides, as `train` takes them after its config. */
  overrides: string[];
  resume: boolean;
}

/** The recipe a page address asks for; an unknown parameter is refused with the ones there are. */
export function recipeFromQuery(query: URLSearchParams): PageRecipe {
  const overrides: string[] = [];
  let resume = false;
  for (const [key, value] of query) {
    if (key === 'resume') resume = value !== '0' && value !== 'false';
    else if (SHORT_NAMES[key]) overrides.push(`${SHORT_NAMES[key]}=${value}`);
    else if (key.includes('.')) overrides.push(`${key}=${value}`);
    else throw new Error(`?${key}: not a setting; use one of ${Object.keys(SHORT_NAMES).join(', ')}, resume, or a config path such as optim.lr`);
  }
  return { overrides, resume };
}
