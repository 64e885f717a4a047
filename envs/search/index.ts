// The search-QA environment's public surface, for the registry, the server and the trainer.

export { searchAgent } from './agent.ts';
export { loadQuestions, qaExampleOf, type QaExample } from './dataset.ts';
export { worldCorpus } from './documents.ts';
export {
  builtInSearchData, INVALID_ACTION_MESSAGE, SEARCH_ACTIONS, SEARCH_MAX_TURNS, SEARCH_TOPK, SearchEnvironment, SearchSession,
  type SearchEnvironmentOptions,
} from './env.ts';
export { searchExpertAction } from './expert.ts';
export { generate, generateSearchData, type GenerateOptions, type SearchData, type SearchDataFiles } from './generate.ts';
export { HttpRetriever, RETRIEVER_PROTOCOLS, RetrieverError, type HttpRetrieverOptions, type RetrieverProtocol } from './http_retriever.ts';
export { loadCorpus, parseJsonl, saveJsonl, toJsonl, type CorpusDocument } from './jsonl.ts';
export { exactMatch, normalizeAnswer } from './normalize.ts';
export { resolveSearchOptions, searchEnvironmentFrom, searchOptions, searchReferenceOf, type SearchOptions } from './options.ts';
export { cutAfterAction, parseSdar, parseSearchR1, parseSearchTurn, SEARCH_PARSINGS, type ParsedSearchTurn, type SearchAction, type SearchParsing } from './parse.ts';
export { renderSearchPrompt, SEARCH_HISTORY_LENGTH, type SearchPromptInput, type SearchTurn } from './prompt.ts';
export { DatasetQuestions, GeneratedQuestions, type QuestionFiles, type QuestionSource, type SearchTask } from './question_source.ts';
export { drawQuestion, parseQuestion, TEMPLATES as QUESTION_TEMPLATES, type QuestionType } from './questions.ts';
export { formatInformation, RESULT_FORMATS, type ResultFormat } from './result_format.ts';
export { Bm25Retriever, type RetrievalHit, type RetrievedDocument, type Retriever } from './retriever.ts';
export { RoundBatcher } from './round_batch.ts';
export { SEARCH_TASK_TYPES, searchSkills } from './skills.ts';
export { generateWorld, WORLD_SEED, type World } from './world.ts';
