// The ids the trainer trains on for the Qwen2.5, Qwen3 and Qwen3.5 templates and
// tokenizer files, against the ids transformers' apply_chat_template renders for the
// same inputs (tests/fixtures/chat_templates/goldens.json, made by
// dev/make_template_goldens.py on the H200 machine): agent-turn prompts, teacher
// prompts with the skills block in both placements, SFT samples from a run's rollout
// log and from text, chat-server prompts, under each thinking setting; and which
// template file wins when a directory holds several.

import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { after, describe, test } from 'node:test';
import type { AgentSpec } from '../src/envs/agent_spec.ts';
import { enableThinkingOf, thinkingFormat, type ThinkingMode } from '../src/tokenizer/thinking.ts';
import { loadTokenizer, type Tokenizer } from '../src/tokenizer/tokenizer.ts';
import { runRollout } from '../src/rollout/agent_loop.ts';
import type { Engine, GenerationRequest, GenerationResult } from '../src/engines/engine.ts';
import { encodePrefixedTurnPrompt, encodeTurnPrompt, renderedResponseIds, TemplateTurnError } from '../src/rollout/tokenize_turn.ts';
import { readTrajectoryLog, TrajectoryLog } from '../src/rollout/trajectory_log.ts';
import { parseChat } from '../src/serve/chat.ts';
import { readSftRecords, selectTurns, sftSamples } from '../src/sft/sft_data.ts';
import { envPlugin } from '../envs/registry.ts';
import { FAMILIES, familyDir, templateFixture } from './support/qwen_templates.ts';

interface Golden {
  ids: number[];
}
type BySetting = Record<'default' | 'off' | 'on', Golden>;
interface FamilyGoldens {
  turns: Record<string, BySetting>;
  teacher: Record<string, BySetting>;
  exchanges: Record<string, BySetting>;
  chats: Record<string, BySetting>;
}
interface Goldens {
  transformers: string;
  families: Record<string, FamilyGoldens>;
  precedence: Record<string, { text?: string; error?: string }>;
}
interface Inputs {
  turns: { name: string; user: string }[];
  teacher: { name: string; prefix: string; user: string }[];
  exchanges: { name: string; user: string; assistant: string }[];
  chats: { name: string; messages: { role: string; content: unknown }[] }[];
}

const inputs = JSON.parse(fs.readFileSync(templateFixture('inputs.json'), 'utf8')) as Inputs;
const goldens = JSON.parse(fs.readFileSync(templateFixture('goldens.json'), 'utf8')) as Goldens;
const MODES: ThinkingMode[] = ['default', 'off', 'on'];
const BIG = 1 << 20;
const tmpRoot = fs.mkdtempSync(path.join(os.tmpdir(), 'template-goldens-'));
after(() => fs.rmSync(tmpRoot, { recursive: true, force: true }));

const tokenizers = new Map<string, Promise<Tokenizer>>();
const tokenizerOf = (family: string) => {
  let t = tokenizers.get(family);
  if (!t) tokenizers.set(family, (t = loadTokenizer(familyDir(family, tmpRoot))));
  return t;
};

/** The golden exchange a model answering in `mode` produces: the template's own format for it. */
function exchangeFor(family: string, mode: ThinkingMode, tok: Tokenizer): string {
  const reasoning = thinkingFormat(tok, mode).reasoning;
  return reasoning === 'tags' ? 'tags' : reasoning === 'native' ? 'native' : 'action_only';
}

/** The golden exchange's ids after its prompt, through the last end token: what a model sampled for that answer. */
function sampledPart(tok: Tokenizer, exchange: number[], prompt: number[]): number[] {
  assert.deepEqual(exchange.slice(0, prompt.length), prompt, 'the golden exchange starts with the golden prompt');
  const rest = exchange.slice(prompt.length);
  let end = rest.length - 1;
  while (end >= 0 && !tok.eosTokenIds.includes(rest[end])) end--;
  assert.ok(end >= 0, 'the golden exchange closes the answer with an end token');
  return rest.slice(0, end + 1);
}

/** Answers every request with the next of `responses` (ids), as a sampler that drew them would. */
class ReplayEngine implements Engine {
  readonly name = 'replay';
  private next = 0;
  constructor(
    private readonly tok: Tokenizer,
    private readonly responses: { ids: number[]; finish: 'stop' | 'length' }[],
  ) {}
  async generate(requests: readonly GenerationRequest[]): Promise<GenerationResult[]> {
    return requests.map(() => {
      const r = this.responses[this.next++ % this.responses.length];
      return { tokenIds: r.ids, logprobs: r.ids.map(() => -1), finishReason: r.finish, text: this.tok.decode(r.ids) };
    });
  }
  async score(): Promise<number[][]> {
    throw new Error('replay engine: no scoring');
  }
}

for (const family of FAMILIES) {
  describe(`${family} goldens (transformers ${goldens.transformers})`, () => {
    const g = () => goldens.families[family];

    test('agent-turn prompts under each thinking setting', async () => {
      const tok = await tokenizerOf(family);
      for (const mode of MODES) {
        for (const c of inputs.turns) {
          assert.deepEqual(encodeTurnPrompt(tok, c.user, BIG, enableThinkingOf(mode)).ids, g().turns[c.name][mode].ids, `${c.name}, thinking ${mode}`);
        }
      }
    });

    test('teacher prompts: the skills block before the template, and inside the user message', async () => {
      const tok = await tokenizerOf(family);
      for (const mode of MODES) {
        for (const c of inputs.teacher) {
          assert.deepEqual(encodePrefixedTurnPrompt(tok, c.prefix, c.user, BIG, enableThinkingOf(mode)).ids, g().teacher[c.name][mode].ids, `${c.name}, thinking ${mode}`);
        }
        // after_template: the cards are part of the user message the template frames.
        const inside = inputs.turns.find((t) => t.name === 'household_skills_in_prompt')!;
        assert.deepEqual(encodeTurnPrompt(tok, inside.user, BIG, enableThinkingOf(mode)).ids, g().turns[inside.name][mode].ids);
      }
    });

    test('SFT from text: prompt + the template\'s rendering of the answer is the rendered exchange through its end token', async () => {
      const tok = await tokenizerOf(family);
      for (const mode of MODES) {
        const enableThinking = enableThinkingOf(mode);
        for (const c of inputs.exchanges) {
          const prompt = encodeTurnPrompt(tok, c.user, BIG, enableThinking).ids;
          const exchange = g().exchanges[c.name][mode].ids;
          const at = `${c.name}, thinking ${mode}`;
          const continues = exchange.length > prompt.length && prompt.every((id, i) => exchange[i] === id);
          const exchangeText = tok.decode(exchange);
          if (!exchangeText.startsWith(tok.decode(prompt))) {
            // The template moved a think block the answer carried while thinking is off: refused, not trained wrong.
            assert.throws(() => renderedResponseIds(tok, c.user, c.assistant, enableThinking), TemplateTurnError, at);
            continue;
          }
          const response = renderedResponseIds(tok, c.user, c.assistant, enableThinking);
          if (continues) {
            assert.deepEqual([...prompt, ...response], [...prompt, ...sampledPart(tok, exchange, prompt)], at);
          } else {
            // The rendered text continues the prompt but merges across the seam (Qwen3.5's opened "<think>\n" and
            // an empty block's "\n"): the answer is the same text in the tokens a model continuing the prompt samples.
            const end = exchangeText.lastIndexOf(tok.decode([response[response.length - 1]]));
            assert.equal(tok.decode([...prompt, ...response]), exchangeText.slice(0, end + tok.decode([response[response.length - 1]]).length), at);
          }
          // A recorded text that kept the sampled end token as text gets it once.
          const eosText = tok.decode([response[response.length - 1]]);
          const [sample] = sftSamples(tok, { samples: [{ prompt: c.user, response: `${c.assistant}${eosText}`, split: 'train', seed: 0, turn: 0, taskType: 't' }], skippedEpisodes: 0, skippedTurns: 0 }, BIG, mode, 'text');
          assert.deepEqual(sample.responseIds, response, `${c.name}, thinking ${mode}: no doubled end token`);
        }
      }
    });

    for (const mode of MODES) {
      test(`SFT from a run's rollout log, thinking ${mode}: the sampled ids as they were, no end token added`, async () => {
        const tok = await tokenizerOf(family);
        const name = exchangeFor(family, mode, tok);
        const c = inputs.exchanges.find((e) => e.name === name)!;
        const prompt = g().turns.household[mode].ids;
        assert.equal(c.user, inputs.turns.find((t) => t.name === 'household')!.user);
        const sampled = sampledPart(tok, g().exchanges[name][mode].ids, prompt);
        const cut = sampled.slice(0, -1);
        // The household environment, its prompt text pinned to the golden's input.
        const household = envPlugin('household');
        const spec: AgentSpec = { ...household.agent, renderPrompt: () => c.user };
        const file = path.join(tmpRoot, `${family}-${mode}.jsonl`);
        const log = new TrajectoryLog(file);
        try {
          const { trajectories } = await runRollout({
            env: household.create(household.options.parse({})),
            spec,
            engine: new ReplayEngine(tok, [{ ids: sampled, finish: 'stop' }, { ids: cut, finish: 'length' }]),
            tokenizer: tok,
            thinking: mode,
            tasks: [{ split: 'train', seed: 7 }],
            groupSize: 1,
            maxPromptTokens: 4096,
            maxResponseTokens: 4096,
            maxTurns: 2,
            trajectoryLog: log,
          });
          assert.equal(trajectories[0].turns.length, 2);
        } finally {
          log.close();
        }
        // The run's log, made a won episode so that SFT takes its turns.
        const records = readTrajectoryLog(file).map((r) => ({ ...r, won: true }));
        assert.equal(records[0].thinking, mode);
        fs.writeFileSync(file, records.map((r) => JSON.stringify(r)).join('\n'));
        const selection = selectTurns(readSftRecords(file));
        const samples = sftSamples(tok, selection, 4096, mode, file);
        assert.equal(samples.length, 2);
        assert.deepEqual([...samples[0].promptIds, ...samples[0].responseIds], [...prompt, ...sampled], 'an ended turn: the rendered exchange through its end token');
        assert.deepEqual(samples[1].responseIds, cut, 'a turn cut at the token limit: no end token');
        assert.ok(!tok.eosTokenIds.includes(samples[1].responseIds[samples[1].responseIds.length - 1]));
        // Another thinking mode's prompts would not be what these ids answered.
        const other = mode === 'off' ? 'on' : 'off';
        assert.throws(() => sftSamples(tok, selection, 4096, other, file), /sampled with model\.thinking=/);
      });
    }

    test('chat-server prompts: text parts joined as vLLM joins them for a template that reads content as one string', async () => {
      const tok = await tokenizerOf(family);
      const limits = { vocab: 151936, maxModelLen: 1 << 16, maxChoices: 4, maxLogprobs: 20 };
      // The goldens render parts joined by newlines; a template that walks the parts itself (Qwen3.5's) gets them as a list (serve_requests.test.ts).
      const chats = inputs.chats.filter((c) => tok.contentFormat === 'string' || c.messages.every((m) => !Array.isArray(m.content)));
      for (const mode of MODES) {
        const enableThinking = enableThinkingOf(mode);
        for (const c of chats) {
          const body = { messages: c.messages, ...(enableThinking === undefined ? {} : { chat_template_kwargs: { enable_thinking: enableThinking } }) };
          assert.deepEqual(parseChat(body, tok, limits).promptIds, g().chats[c.name][mode].ids, `${c.name}, thinking ${mode}`);
        }
      }
    });
  });
}

describe('template files in transformers\' order', () => {
  const probe = [{ role: 'user', content: 'Hi' }];
  const files = (d: string, config: boolean, jinja: boolean, json: boolean) => {
    fs.mkdirSync(d);
    fs.copyFileSync(path.join(familyDir('qwen3', tmpRoot), 'tokenizer.json'), path.join(d, 'tokenizer.json'));
    const cfg = JSON.parse(fs.readFileSync(path.join(familyDir('qwen3', tmpRoot), 'tokenizer_config.json'), 'utf8'));
    if (config) cfg.chat_template = '{% for m in messages %}config:{{ m.content }}{% endfor %}';
    else delete cfg.chat_template;
    fs.writeFileSync(path.join(d, 'tokenizer_config.json'), JSON.stringify(cfg));
    if (jinja) fs.writeFileSync(path.join(d, 'chat_template.jinja'), '{% for m in messages %}jinja:{{ m.content }}{% endfor %}');
    if (json) fs.writeFileSync(path.join(d, 'chat_template.json'), JSON.stringify({ chat_template: '{% for m in messages %}json:{{ m.content }}{% endfor %}' }));
  };
  const variants: Record<string, [boolean, boolean, boolean]> = {
    config_and_jinja: [true, true, false],
    config_and_json: [true, false, true],
    jinja_and_json: [false, true, true],
    json_only: [false, false, true],
    all_three: [true, true, true],
  };
  for (const [name, [config, jinja, json]] of Object.entries(variants)) {
    test(name, async () => {
      const d = path.join(tmpRoot, `precedence-${name}`);
      files(d, config, jinja, json);
      const expected = goldens.precedence[name];
      const tok = await loadTokenizer(d);
      if (expected.error !== undefined) assert.throws(() => tok.applyChatTemplate(probe), /no chat template/);
      else assert.equal(tok.applyChatTemplate(probe), expected.text);
    });
  }
});
