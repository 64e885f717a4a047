// The search-QA environment's public surface, for the registry, the server and the trainer.

export { worldCorpus } from './documents.ts';
export {
  builtInSearchData, DatasetQuestions, formatInformation, GeneratedQuestions, INVALID_ACTION_MESSAGE, SEARCH_ACTIONS, SEARCH_MAX_TURNS,
  SEARCH_TOPK, SearchEnvironment, searchEnvironmentFromFiles, SearchSession,
  type QuestionSource, type SearchEnvironmentOptions, type SearchFiles, type SearchTask,
} from './env.ts';
export { searchExpertAction } from './expert.ts';
export { generate, generateSearchData, type GenerateOptions, type SearchData, type SearchDataFiles } from './generate.ts';
export { HttpRetriever, type HttpRetrieverOptions } from './http_retriever.ts';
export { loadCorpus, loadDataset, parseJsonl, saveJsonl, toJsonl, type CorpusDocument, type QaExample } from './jsonl.ts';
export { exactMatch, normalizeAnswer } from './normalize.ts';
export { cutResponse, parseSearchResponse, type ParsedSearchTurn, type SearchAction } from './parse.ts';
export { renderSearchPrompt, SEARCH_HISTORY_LENGTH, type SearchPromptInput, type SearchTurn } from './prompt.ts';
export { drawQuestion, parseQuestion, TEMPLATES as QUESTION_TEMPLATES, type QuestionType } from './questions.ts';
export { Bm25Retriever, type RetrievalHit, type RetrievedDocument, type Retriever } from './retriever.ts';
export { SEARCH_TASK_TYPES, searchSkills } from './skills.ts';
export { generateWorld, WORLD_SEED, type World } from './world.ts';
