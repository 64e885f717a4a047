// How a household game words its placing command. Our worlds speak one canonical form,
// "move X to Y" (ALFWorld 0.4 and later); ALFWorld 0.3.3, which AgentGym's server runs,
// places objects with "put X in/on Y" and answers "You put the X in/on the Y.". A
// session in the put grammar translates commands and feedback at its boundary, so the
// world, the expert and the goal tests stay in one form.

export type PlacingGrammar = 'move' | 'put';

const MOVE = /^move (.+) to (.+)$/;
const PUT = /^put (.+) in\/on (.+)$/;

/** A canonical command in `grammar`. */
export function toGrammar(command: string, grammar: PlacingGrammar): string {
  return grammar === 'put' ? command.replace(MOVE, 'put $1 in/on $2') : command;
}

/** A command in `grammar` as the canonical form; anything else unchanged (so the other form stays inadmissible). */
export function fromGrammar(command: string, grammar: PlacingGrammar): string {
  if (grammar !== 'put') return command;
  const trimmed = command.trim().toLowerCase().replace(/\s+/g, ' ');
  if (MOVE.test(trimmed)) return '';
  return trimmed.replace(PUT, 'move $1 to $2');
}

/** `action` as `admissible` words it, when the other grammar's form of it is admitted (a policy trained on one grammar, a server on the other). */
export function translateAction(action: string, admissible: readonly string[]): string {
  if (admissible.includes(action)) return action;
  for (const grammar of ['put', 'move'] as const) {
    const other = grammar === 'put' ? toGrammar(action, 'put') : action.replace(PUT, 'move $1 to $2');
    if (admissible.includes(other)) return other;
  }
  return action;
}

/** Canonical feedback text in `grammar`. */
export function feedbackInGrammar(text: string, grammar: PlacingGrammar): string {
  return grammar === 'put' ? text.replace(/^You move the (.+) to the (.+)\.$/, 'You put the $1 in/on the $2.') : text;
}
