// Loading a training configuration: a YAML or JSON file (or nothing: the embedded
// defaults), then `a.b.c=value` overrides from the command line, then validation of
// the whole against the schema, all before any GPU work. Every refusal is a
// ConfigError that names the field path, the value, and where the value came from
// (the file and line, or the command-line override).

import { storage } from '../storage/storage.ts';
import * as path from '../storage/paths.ts';
import { isMap, isScalar, isSeq, LineCounter, parseDocument, type Document } from 'yaml';
import type { z } from 'zod';
import { resolveConfig, TrainConfigSchema, type Method, type TrainConfig } from './config_schema.ts';
import { writeFileAtomic } from '../util/atomic_file.ts';
import { sha256Hex } from '../util/sha256.ts';
import { runMethod, singleRunProblem } from './methods.ts';
import { RUN_CONFIG_FILE } from '../report/run_files.ts';

export * from './config_schema.ts';

/** An invalid training configuration; the message names the field path. */
export class ConfigError extends Error {
  override name = 'ConfigError';
}

/** Where the file's values came from, for messages: path -> "file:line". */
type Origins = (fieldPath: string) => string | null;

interface Source {
  data: unknown;
  origin: Origins;
}

function readSource(file: string): Source {
  let text: string;
  try {
    text = storage().readText(file);
  } catch (e) {
    throw new ConfigError(`${file}: cannot read the config file (${(e as Error).message})`);
  }
  const ext = path.extname(file).toLowerCase();
  if (!['.yaml', '.yml', '.json'].includes(ext)) throw new ConfigError(`${file}: expected a .yaml, .yml or .json file`);
  const lines = new LineCounter();
  // The JSON schema refuses YAML-only scalars, so a .json file must really be JSON.
  const doc = parseDocument(text, { lineCounter: lines, schema: ext === '.json' ? 'json' : 'core', uniqueKeys: true, prettyErrors: false });
  const err = doc.errors[0];
  if (err) {
    const { line, col } = lines.linePos(err.pos[0]);
    throw new ConfigError(`${file}:${line}:${col}: ${ext === '.json' ? 'JSON' : 'YAML'} syntax error: ${err.message.split('\n')[0]}`);
  }
  const data = doc.toJS() ?? {};
  if (typeof data !== 'object' || Array.isArray(data)) throw new ConfigError(`${file}: expected a mapping of settings at the top level`);
  return { data, origin: (p) => nodeLine(doc, p, lines, file) };
}

/** The line of the file that sets `fieldPath`; null when the file does not set it (its value is a default or an override's). */
function nodeLine(doc: Document, fieldPath: string, lines: LineCounter, file: string): string | null {
  const keys = fieldPath === '' ? [] : fieldPath.split('.');
  const node = keys.length === 0 ? doc.contents : doc.getIn(keys, true);
  return (isScalar(node) || isMap(node) || isSeq(node)) && node.range ? `${file}:${lines.linePos(node.range[0]).line}` : null;
}

interface Override {
  flag: string;
  keys: string[];
}

function parseValue(raw: string): unknown {
  try {
    return JSON.parse(raw);
  } catch {
    return raw;
  }
}

/** Applies `a.b.c=value` (value as JSON when it parses as JSON, else the string itself). */
export function applyOverride(data: Record<string, unknown>, assignment: string): Override {
  const flag = `override ${assignment}`;
  const eq = assignment.indexOf('=');
  if (eq <= 0) throw new ConfigError(`${flag}: expected key.path=value`);
  const keys = assignment.slice(0, eq).trim().split('.');
  if (keys.some((k) => k === '' || k === '__proto__' || k === 'constructor' || k === 'prototype')) {
    throw new ConfigError(`${flag}: "${assignment.slice(0, eq)}" is not a valid key path`);
  }
  let at: Record<string, unknown> = data;
  keys.slice(0, -1).forEach((k, i) => {
    const next = at[k];
    if (next === undefined || next === null) at[k] = {};
    else if (typeof next !== 'object' || Array.isArray(next)) {
      throw new ConfigError(`${flag}: ${keys.slice(0, i + 1).join('.')} is ${JSON.stringify(next)}, not a group of settings`);
    }
    at = at[k] as Record<string, unknown>;
  });
  at[keys[keys.length - 1]] = parseValue(assignment.slice(eq + 1));
  return { flag, keys };
}

/**
 * Reads `file` (YAML or JSON by extension; none: the defaults), applies `overrides`
 * in order and validates the result. Throws ConfigError naming the field path.
 */
export function loadConfig(file?: string, overrides: readonly string[] = []): TrainConfig {
  const source: Source = file ? readSource(file) : { data: {}, origin: () => null };
  const data = structuredClone(source.data) as Record<string, unknown>;
  const applied = overrides.map((o) => applyOverride(data, o));
  const origin: Origins = (fieldPath) => {
    const keys = fieldPath === '' ? [] : fieldPath.split('.');
    // The last override touching this field (or a group containing it) decided its value.
    const o = [...applied].reverse().find((a) => a.keys.every((k, i) => i >= keys.length || keys[i] === k));
    if (o) return o.flag;
    return source.origin(fieldPath);
  };
  const cfg = validateConfig(data, origin);
  const single = singleRunProblem(cfg);
  if (single && 'refuse' in single) {
    const where = origin('rollout.groupSize');
    throw new ConfigError(`rollout.groupSize: 1 refused: ${single.refuse}${where ? ` (from ${where})` : ''}`);
  }
  return cfg;
}

/** What the run will do that the user may not expect, to print before it starts. */
export function configWarnings(cfg: TrainConfig): string[] {
  const single = singleRunProblem(cfg);
  return single && 'warn' in single ? [single.warn] : [];
}

/** Validates plain data (a parsed file, or a trainer state's saved config) and fills the defaults. */
export function validateConfig(data: unknown, origin: Origins = () => null): TrainConfig {
  const result = TrainConfigSchema.safeParse(data, { reportInput: true });
  if (!result.success) {
    const messages = result.error.issues.map((issue) => describeIssue(issue, origin));
    throw new ConfigError(messages.length === 1 ? messages[0] : `invalid configuration:\n  ${messages.join('\n  ')}`);
  }
  return resolveConfig(result.data);
}

type Issue = z.core.$ZodIssue;

function describeIssue(issue: Issue, origin: Origins): string {
  const keys = issue.path.map(String);
  if (issue.code === 'unrecognized_keys') {
    // One message per key, each under its own full path.
    return issue.keys.map((k) => {
      const p = [...keys, k].join('.');
      const known = knownKeys(keys);
      const hint = closest(k, known);
      const where = origin(p);
      return `${p}: unknown setting${hint ? ` (did you mean "${hint}"?)` : ''}${known.length ? `; ${keys.length ? keys.join('.') : 'the top level'} takes ${known.join(', ')}` : ''}${where ? ` (from ${where})` : ''}`;
    }).join('\n  ');
  }
  const p = keys.join('.') || '(top level)';
  const where = origin(keys.join('.'));
  const got = 'input' in issue && issue.input !== undefined ? `, got ${show(issue.input)}` : issue.code === 'invalid_type' ? ', but it is missing' : '';
  return `${p}: ${expectation(issue, keys)}${got}${where ? ` (from ${where})` : ''}`;
}

function show(v: unknown): string {
  const s = JSON.stringify(v);
  return s === undefined ? String(v) : s.length > 60 ? `${s.slice(0, 57)}...` : s;
}

function expectation(issue: Issue, keys: string[]): string {
  const integer = isIntegerField(keys);
  const kind = integer ? 'an integer' : 'a number';
  switch (issue.code) {
    case 'invalid_type':
      if (issue.expected === 'int') return 'expected an integer';
      return `expected ${issue.expected === 'object' ? 'a group of settings' : `a ${issue.expected}`}`;
    case 'too_small': {
      if (issue.origin === 'array') return `expected at least ${issue.minimum} item(s)`;
      if (issue.origin === 'string') return 'expected a non-empty string';
      if (Number(issue.minimum) === 0 && !issue.inclusive) return `expected a positive ${integer ? 'integer' : 'number'}`;
      return `expected ${kind} ${issue.inclusive ? '>=' : '>'} ${issue.minimum}`;
    }
    case 'too_big':
      if (issue.origin === 'array') return `expected at most ${issue.maximum} item(s)`;
      return `expected ${kind} ${issue.inclusive ? '<=' : '<'} ${issue.maximum}`;
    case 'invalid_value':
      return `expected one of ${issue.values.map((v) => JSON.stringify(v)).join(', ')}`;
    case 'invalid_format':
      return issue.format === 'url' ? 'expected an http(s) URL' : `expected ${issue.format}`;
    default:
      return issue.message;
  }
}

type AnySchema = z.core.$ZodType;

/** The object or leaf schema at a field path, looking through optional/default/nullable wrappers. */
function schemaAt(keys: readonly string[]): AnySchema | null {
  let s: AnySchema | null = unwrap(TrainConfigSchema);
  for (const k of keys) {
    if (!s || s._zod.def.type !== 'object') return null;
    const shape: Record<string, AnySchema> = (s._zod.def as z.core.$ZodObjectDef).shape;
    s = Object.hasOwn(shape, k) ? unwrap(shape[k]) : null;
  }
  return s;
}

function unwrap(s: AnySchema): AnySchema {
  let cur = s;
  for (;;) {
    const def = cur._zod.def as { type: string; innerType?: AnySchema; in?: AnySchema };
    if (def.innerType) cur = def.innerType;
    else if (def.type === 'pipe' && def.in) cur = def.in;
    else return cur;
  }
}

function isIntegerField(keys: readonly string[]): boolean {
  const s = schemaAt(keys);
  return !!s && s._zod.def.type === 'number' && (s._zod.def as { format?: string }).format === 'safeint';
}

function knownKeys(keys: readonly string[]): string[] {
  const s = schemaAt(keys);
  return s && s._zod.def.type === 'object' ? Object.keys((s._zod.def as z.core.$ZodObjectDef).shape) : [];
}

function closest(word: string, candidates: readonly string[]): string | null {
  let best: string | null = null;
  let bestDistance = Math.max(2, Math.floor(word.length / 3)) + 1;
  for (const c of candidates) {
    const d = editDistance(word.toLowerCase(), c.toLowerCase());
    if (d < bestDistance) {
      best = c;
      bestDistance = d;
    }
  }
  return best;
}

function editDistance(a: string, b: string): number {
  let prev = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const cur = [i];
    for (let j = 1; j <= b.length; j++) cur[j] = Math.min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] === b[j - 1] ? 0 : 1));
    prev = cur;
  }
  return prev[b.length];
}

/** Refuses methods the trainer does not run yet, listing those it does. */
export function assertImplemented(method: Method | string, implemented: readonly string[]): void {
  if (!implemented.includes(method)) {
    throw new ConfigError(`method: "${method}" is not implemented yet; implemented: ${implemented.join(', ')}`);
  }
}

/** Whether any iteration of the run scores with a teacher. */
/** Whether any iteration of the run has a teacher pass. */
export function usesTeacher(cfg: TrainConfig): boolean {
  const method = runMethod(cfg);
  if (method.def.loop !== 'rl') return false;
  return Array.from({ length: cfg.iterations }, (_, i) => method.plan(i + 1)).some((p) => p.teacher);
}

/** The configuration without the servers' API keys, which go nowhere but the servers. */
export function withoutSecrets(cfg: TrainConfig): TrainConfig {
  const { apiKey: _r, ...rollout } = cfg.rollout;
  const { apiKey: _t, ...teacher } = cfg.teacher;
  return { ...cfg, rollout, teacher };
}

/** A `key=value` override as logs and records show it: the servers' API keys hidden. */
export function overrideWithoutSecrets(override: string): string {
  return override.replace(/^((?:rollout|teacher)\.apiKey=).*/, '$1<hidden>');
}

/** Where the servers are and how patiently they are waited for: a resumed run may use others. */
function withoutConnections(cfg: TrainConfig): Record<string, unknown> {
  const strip = <T extends object>(block: T, keys: readonly string[]) => Object.fromEntries(Object.entries(block).filter(([k]) => !keys.includes(k)));
  const server = ['url', 'apiKey', 'serverWaitSeconds', 'waitForAllServers', 'failoverSeconds', 'probeTolerance'];
  return { ...cfg, rollout: strip(cfg.rollout, server), teacher: strip(cfg.teacher, server), env: strip(cfg.env, ['url']) };
}

/**
 * Settings that may change when a run is resumed (how long it runs, where and how
 * often it saves, which servers it uses) are left out; everything that shapes the
 * training itself is in.
 */
export function configHash(cfg: TrainConfig): string {
  const { iterations: _i, checkpoint: _c, output: _o, gpu: _g, ...rest } = withoutConnections(cfg);
  // A correction that is off trains as runs did before the setting existed, so their
  // checkpoints resume and their archived runs share the recipe's hash.
  const { rolloutCorrection, ...algorithm } = cfg.algorithm;
  const hashed = rolloutCorrection.mode === 'off' ? { ...rest, algorithm } : rest;
  return sha256Hex(canonicalJson(hashed)).slice(0, 16);
}

function canonicalJson(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(canonicalJson).join(',')}]`;
  if (v !== null && typeof v === 'object') {
    const entries = Object.entries(v).filter(([, x]) => x !== undefined).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, x]) => `${JSON.stringify(k)}:${canonicalJson(x)}`).join(',')}}`;
  }
  return JSON.stringify(v);
}

/** The run's output directory. */
export function runDir(cfg: TrainConfig): string {
  return path.join(cfg.output.dir, cfg.output.runName);
}

/** The configuration recorded in a run directory as plain data, or null when it has none that reads. */
export function readRunConfig(dir: string): unknown {
  try {
    return JSON.parse(storage().readText(path.join(dir, RUN_CONFIG_FILE)));
  } catch {
    return null;
  }
}

/** Records the resolved configuration in the run directory; validateConfig reads it back unchanged. */
export function writeRunConfig(dir: string, cfg: TrainConfig): string {
  const file = path.join(dir, RUN_CONFIG_FILE);
  writeFileAtomic(file, JSON.stringify(withoutSecrets(cfg), null, 2) + '\n');
  return file;
}
