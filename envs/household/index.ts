// The household environment's public surface.

export { parseAction, type InvalidReason, type ParsedAction } from '../think_action.ts';
export { COMBOS, LAYOUTS, TASK_TYPES, type Combo, type Layout, type RoomType, type TaskType } from './catalog.ts';
export { admissibleCommands, execute } from './commands.ts';
export { HOUSEHOLD_MAX_STEPS, HOUSEHOLD_WIN_REWARD, HouseholdEnvironment, HouseholdSession, type HouseholdInfo } from './env.ts';
export { expertPlan, nextExpertAction } from './expert.ts';
export { SearchingExpert } from './searcher.ts';
export { generateWorld, parseTaskRequest, SEEDS_PER_SPLIT, type TaskRequest } from './generate.ts';
export { isWon } from './goal.ts';
export { HOUSEHOLD_HISTORY_LENGTH, renderHouseholdPrompt, type HouseholdPromptInput, type HouseholdTurn } from './prompt.ts';
export { householdKeywordSkills, householdSkillCard, householdSkills, HOUSEHOLD_TASK_KEYWORDS } from './skills.ts';
export type { HouseholdTask, Item, Receptacle, World } from './world.ts';
