// An Engine whose policy is the environment's expert: each turn it answers with the
// action the environment's solver advises from the current state (info.expert_action,
// handed over by the agent loop in the request's context), written in the
// environment's answer format with a short reasoning. It makes SFT warm-start data and
// exercises the agent loop end to end without a model. Its policy is over actions,
// not tokens, so it reports no token log-probs.

import type { AgentSpec } from '../envs/agent_spec.ts';
import type { ThinkingFormat } from '../tokenizer/thinking.ts';
import type { Tokenizer } from '../tokenizer/tokenizer.ts';
import type { Engine, GenerationContext, GenerationRequest, GenerationResult, SamplingParams } from './engine.ts';

export class ExpertEngine implements Engine {
  readonly name = 'expert';

  constructor(
    private readonly tokenizer: Tokenizer,
    /** The turn contract whose answer format the responses take. */
    private readonly spec: AgentSpec,
    /** Where the answers put their reasoning, and what the prompt opened that they continue (default: the reference's tags, nothing opened). */
    private readonly thinking: Pick<ThinkingFormat, 'reasoning' | 'opened'> = { reasoning: 'tags', opened: '' },
  ) {}

  /** The expert's response text for one turn. */
  respond(context: GenerationContext): string {
    const action = context.info.expert_action;
    if (typeof action !== 'string' || action === '') {
      throw new Error(
        `expert engine: ${context.env} gave no expert_action for ${context.trajectoryId} turn ${context.turn} ` +
          '(the environment has no expert, or it cannot solve this task)',
      );
    }
    const task = context.task.trim().replace(/[.!?]+$/, '');
    // Tags inside the reasoning would count as a second action block (search's validity rule): "<search> q </search>" reads "search q".
    const step = action.replace(/^<([a-z]+)>\s*([\s\S]*?)\s*<\/\1>$/, '$1 $2');
    const thought = `The task is: ${task}. From the current state, the next step of the plan is: ${step}.`;
    const response = this.spec.formatResponse(thought, action, this.thinking.reasoning);
    // The prompt already holds what it opened; the answer goes on from there.
    return response.startsWith(this.thinking.opened) ? response.slice(this.thinking.opened.length) : response;
  }

  async generate(requests: readonly GenerationRequest[]): Promise<GenerationResult[]> {
    return requests.map((r, i) => {
      if (r.context === undefined) throw new Error(`expert engine: request ${i} has no context (the expert acts on environment state, not on prompts)`);
      return this.emit(this.respond(r.context), r.params);
    });
  }

  /** Encodes the response and ends it as a sampler would: at a stop string or stop id, else with EOS, within maxTokens. */
  private emit(response: string, params: SamplingParams): GenerationResult {
    let text = response;
    let stopped = false;
    for (const s of params.stop ?? []) {
      const at = text.indexOf(s);
      if (s !== '' && at >= 0) {
        text = text.slice(0, at + s.length);
        stopped = true;
      }
    }
    let ids = this.tokenizer.encode(text, { addSpecialTokens: false });
    const stopIds = new Set(params.stopTokenIds ?? []);
    const hit = ids.findIndex((id) => stopIds.has(id));
    if (hit >= 0) {
      ids = ids.slice(0, hit + 1);
      stopped = true;
    }
    const eos = this.tokenizer.eosTokenIds[0];
    if (!stopped && !params.ignoreEos && eos !== undefined) ids.push(eos);
    let finishReason: GenerationResult['finishReason'] = 'stop';
    if (ids.length > params.maxTokens) {
      ids = ids.slice(0, params.maxTokens);
      finishReason = 'length';
    }
    return { tokenIds: ids, logprobs: [], finishReason, text: this.tokenizer.decode(ids, { skipSpecialTokens: true }) };
  }

  /** Scoring needs a distribution over text; the expert only has one over environment states. */
  async score(): Promise<number[][]> {
    throw new Error('expert engine: cannot score token sequences (its policy reads environment state, not prompts); score with a model engine');
  }
}
