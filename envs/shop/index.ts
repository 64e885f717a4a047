// The shop environment's public surface, for the registry, the server and the trainer.

export { catalogue, productByAsin, type Product } from './catalogue.ts';
export { ShopEnvironment, ShopSession, parseShopTask, SHOP_MAX_STEPS, SHOP_WIN_REWARD } from './env.ts';
export { shopExpertAction } from './expert.ts';
export { drawGoal } from './goals.ts';
export { parseShopAction, renderShopPrompt, SHOP_HISTORY_LENGTH, type ParsedAction, type ShopPromptInput, type ShopTurn } from './prompt.ts';
export { shopReward, type ShopGoal, type ShopScore } from './reward.ts';
export { shopKeywordSkills, SHOP_TASK_KEYWORDS, SHOP_TASK_TYPES } from './skills.ts';
