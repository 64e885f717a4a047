// How a chat server hands a message's text parts to a chat template, decided per
// template the way vLLM decides it (its chat-template content-format detection, in
// vllm/renderers/hf.py): a template that walks a message's content itself gets the
// parts as a list ('openai'); any other gets one string, the text parts joined by
// newlines ('string'). The decision reads the template's syntax tree:
//   - the names that hold the message list: `messages`, and any name set from one of
//     them (`{% set msgs = messages[1:] %}`, through filters, tests and slices);
//   - the names that hold a message: the targets of `{% for m in <a message list> %}`;
//   - a loop over content: `{% for part in m.content %}` (or m['content']) for such an
//     m, or `{% for item in content %}`, the form Qwen3.5's template takes inside a
//     macro it passes each message's content to.
// A template that does not parse reads content as one string.

import { Template } from '@huggingface/jinja';

export type ContentFormat = 'string' | 'openai';

interface Node {
  type: string;
  [key: string]: unknown;
}

const isNode = (v: unknown): v is Node => v !== null && typeof v === 'object' && typeof (v as { type?: unknown }).type === 'string';

/** Every node of the tree under `root`, root included. */
function allNodes(root: Node): Node[] {
  const out: Node[] = [];
  const visit = (v: unknown): void => {
    if (Array.isArray(v)) v.forEach(visit);
    else if (v instanceof Map) for (const [k, x] of v) (visit(k), visit(x));
    else if (isNode(v)) {
      out.push(v);
      for (const child of Object.values(v)) visit(child);
    }
  };
  visit(root);
  return out;
}

const isName = (n: unknown, name: string): boolean => isNode(n) && n.type === 'Identifier' && n.value === name;

/** `name.key` or `name['key']`. */
function isMember(n: Node, name: string, key: string): boolean {
  if (n.type !== 'MemberExpression' || !isName(n.object, name)) return false;
  const p = n.property as Node;
  return n.computed ? p.type === 'StringLiteral' && p.value === key : isName(p, key);
}

/** `name` (or `name.key`), possibly filtered, tested or sliced: what a loop over it or an assignment from it reads. */
function reads(n: unknown, name: string, key?: string): boolean {
  if (!isNode(n)) return false;
  if (n.type === 'FilterExpression' || n.type === 'TestExpression') return reads(n.operand, name, key);
  if (n.type === 'SelectExpression') return reads(n.lhs, name, key);
  if (n.type === 'MemberExpression' && n.computed && isNode(n.property) && n.property.type === 'SliceExpression') return reads(n.object, name, key);
  return key === undefined ? isName(n, name) : isMember(n, name, key);
}

/** The loop variable of a `for` over something that reads one of `names` (with `key`), if it is a single name. */
function loopTargets(nodes: Node[], names: readonly string[], key?: string): string[] {
  const out: string[] = [];
  for (const loop of nodes) {
    const target = loop.loopvar as Node;
    if (loop.type === 'For' && target.type === 'Identifier' && names.some((name) => reads(loop.iterable, name, key))) out.push(target.value as string);
  }
  return out;
}

/** `messages` and every name set from it, directly or through another such name. */
function messageListNames(nodes: Node[]): string[] {
  const names = ['messages'];
  for (let i = 0; i < names.length; i++) {
    for (const set of nodes) {
      if (set.type !== 'Set' || !isNode(set.assignee) || set.assignee.type !== 'Identifier') continue;
      const target = set.assignee.value as string;
      if (!names.includes(target) && reads(set.value, names[i])) names.push(target);
    }
  }
  return names;
}

export function templateContentFormat(source: string): ContentFormat {
  let root: Node;
  try {
    root = new Template(source).parsed as unknown as Node;
  } catch {
    return 'string';
  }
  const nodes = allNodes(root);
  const messages = loopTargets(nodes, messageListNames(nodes));
  if (loopTargets(nodes, messages, 'content').length) return 'openai';
  return nodes.some((n) => n.type === 'For' && isName(n.iterable, 'content')) ? 'openai' : 'string';
}
