// The privileged skills block every environment's teacher prompt carries
// (docs/ALGORITHMS.md section 2): a header line, the skill text, a blank line.

export const SKILL_HEADER = '[Privileged Skill Information]';

/** "[Privileged Skill Information]\n<skills>\n\n". */
export function skillBlock(skills: string): string {
  return `${SKILL_HEADER}\n${skills}\n\n`;
}

/**
 * Where a teacher prompt puts the block: before the whole templated prompt, as the
 * SDAR reference code does (the default), or at the start of the turn's user message,
 * so that the chat template frames it like the rest of the prompt.
 */
export type SkillsPlacement = 'user_message' | 'before_template';

export const SKILLS_PLACEMENTS: readonly SkillsPlacement[] = ['user_message', 'before_template'];

/**
 * The reference's keyword routing (SkillProvider.get_privileged_info_from_prompt):
 * every task type, in table order, any of whose keywords occurs in the lower-cased
 * text. Several may match; none means the general card alone.
 */
export function keywordTaskTypes(text: string, table: readonly (readonly [string, readonly string[]])[]): string[] {
  const lower = text.toLowerCase();
  return table.filter(([, keywords]) => keywords.some((k) => lower.includes(k))).map(([type]) => type);
}
