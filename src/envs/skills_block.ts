// The privileged skills block every environment's teacher prompt carries (shared
// design ALGORITHMS.md section 2): a header line, the skill text, a blank line.

export const SKILL_HEADER = '[Privileged Skill Information]';

/** "[Privileged Skill Information]\n<skills>\n\n". */
export function skillBlock(skills: string): string {
  return `${SKILL_HEADER}\n${skills}\n\n`;
}

/**
 * Where a teacher prompt puts the block: at the start of the turn's user message
 * (this project's default, so the chat template frames it like the rest of the
 * prompt), or before the whole templated prompt, as the SDAR reference code does.
 */
export type SkillsPlacement = 'user_message' | 'before_template';

export const SKILLS_PLACEMENTS: readonly SkillsPlacement[] = ['user_message', 'before_template'];
