// Task indices as a configuration names them for a server that numbers its tasks
// (AgentGym: ALFWorld's game index, WebShop's goal index): an inclusive range "A-B"
// or a list of indices, kept in the order given.

/** A range "A-B" (inclusive) or a list of indices. */
export type TaskIndexSpec = string | readonly number[];

const RANGE = /^\s*(\d+)\s*-\s*(\d+)\s*$/;

/** Why `spec` names no indices, or null when it is well formed. */
export function taskIndexProblem(spec: TaskIndexSpec): string | null {
  if (typeof spec === 'string') {
    const m = RANGE.exec(spec);
    if (m === null) return `expected a range "A-B" or a list of indices, got ${JSON.stringify(spec)}`;
    if (Number(m[1]) > Number(m[2])) return `the range ${spec.trim()} is empty (its start is past its end)`;
    return null;
  }
  if (spec.length === 0) return 'the list names no index';
  const bad = spec.find((i) => !Number.isSafeInteger(i) || i < 0);
  if (bad !== undefined) return `indices are integers >= 0, got ${bad}`;
  return new Set(spec).size === spec.length ? null : 'the list names an index twice';
}

/** The indices `spec` names, in order; throws naming the problem. */
export function taskIndices(spec: TaskIndexSpec): number[] {
  const problem = taskIndexProblem(spec);
  if (problem !== null) throw new RangeError(problem);
  if (typeof spec !== 'string') return [...spec];
  const [, a, b] = RANGE.exec(spec)!;
  return Array.from({ length: Number(b) - Number(a) + 1 }, (_, i) => Number(a) + i);
}

/** Short text for messages: "2420-2619", "3, 8, 11", "3, 8, 11, ... (40 indices)". */
export function describeTaskIndices(spec: TaskIndexSpec): string {
  if (typeof spec === 'string') return spec.replace(/\s+/g, '');
  return spec.length <= 6 ? spec.join(', ') : `${spec.slice(0, 3).join(', ')}, ... (${spec.length} indices)`;
}
