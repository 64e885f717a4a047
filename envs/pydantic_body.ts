// A JSON request body checked the way a FastAPI endpoint that takes a pydantic model
// checks it (pydantic 2, lax mode), with FastAPI's answer when it fails: 422
// {"detail": [{"type", "loc", "msg", "input"(, "ctx")}, ...]}, one entry per problem,
// fields in declaration order. Only the field kinds the retrieval servers' request
// models use are here. Measured against FastAPI 0.142 and pydantic 2.13.

export interface PydanticError {
  type: string;
  loc: (string | number)[];
  msg: string;
  input: unknown;
  ctx?: Record<string, unknown>;
}

/** A body FastAPI refuses; `detail` is its answer's body. */
export class ValidationFailure extends Error {
  override name = 'ValidationFailure';
  constructor(readonly detail: PydanticError[]) {
    super(detail.map((d) => `${d.loc.join('.')}: ${d.msg}`).join('; '));
  }
}

export type FieldKind = 'str' | 'list[str]' | 'optional[int]' | 'bool';

export interface FieldSpec {
  name: string;
  kind: FieldKind;
  /** Absent: the field is required. */
  default?: unknown;
}

const TRUE = new Set(['1', 'on', 't', 'true', 'y', 'yes']);
const FALSE = new Set(['0', 'off', 'f', 'false', 'n', 'no']);
const INT_TEXT = /^\s*[+-]?\d+(?:_\d+)*(?:\.0*)?\s*$/;

function checkValue(kind: FieldKind, v: unknown, loc: (string | number)[], errors: PydanticError[]): unknown {
  const fail = (type: string, msg: string) => void errors.push({ type, loc, msg, input: v });
  switch (kind) {
    case 'str':
      if (typeof v === 'string') return v;
      return fail('string_type', 'Input should be a valid string');
    case 'list[str]':
      if (!Array.isArray(v)) return fail('list_type', 'Input should be a valid list');
      return v.map((item, i) => checkValue('str', item, [...loc, i], errors));
    case 'optional[int]':
      if (v === null) return null;
      if (typeof v === 'boolean') return v ? 1 : 0;
      if (typeof v === 'number') return Number.isInteger(v) ? v : fail('int_from_float', 'Input should be a valid integer, got a number with a fractional part');
      if (typeof v === 'string') return INT_TEXT.test(v) ? Number.parseInt(v.replace(/_/g, ''), 10) : fail('int_parsing', 'Input should be a valid integer, unable to parse string as an integer');
      return fail('int_type', 'Input should be a valid integer');
    case 'bool':
      if (typeof v === 'boolean') return v;
      if (typeof v === 'number' && Number.isInteger(v)) return v === 0 || v === 1 ? v === 1 : fail('bool_parsing', 'Input should be a valid boolean, unable to interpret input');
      if (typeof v === 'string') {
        const s = v.toLowerCase();
        return TRUE.has(s) ? true : FALSE.has(s) ? false : fail('bool_parsing', 'Input should be a valid boolean, unable to interpret input');
      }
      return fail('bool_type', 'Input should be a valid boolean');
  }
}

/** Parses `text` as FastAPI would for a JSON content type and checks it against `fields`; throws ValidationFailure. */
export function parseModelBody(text: string, isJson: boolean, fields: readonly FieldSpec[]): Record<string, unknown> {
  let body: unknown = text === '' ? null : text;
  if (isJson && text !== '') {
    try {
      body = JSON.parse(text);
    } catch (e) {
      const message = (e as Error).message;
      const at = /position (\d+)/.exec(message);
      throw new ValidationFailure([{ type: 'json_invalid', loc: ['body', at ? Number(at[1]) : 0], msg: 'JSON decode error', input: {}, ctx: { error: message } }]);
    }
  }
  if (body === null) throw new ValidationFailure([{ type: 'missing', loc: ['body'], msg: 'Field required', input: null }]);
  if (typeof body !== 'object' || Array.isArray(body)) {
    throw new ValidationFailure([{ type: 'model_attributes_type', loc: ['body'], msg: 'Input should be a valid dictionary or object to extract fields from', input: body }]);
  }
  const given = body as Record<string, unknown>;
  const errors: PydanticError[] = [];
  const out: Record<string, unknown> = {};
  for (const f of fields) {
    if (!(f.name in given)) {
      if ('default' in f) out[f.name] = f.default;
      else errors.push({ type: 'missing', loc: ['body', f.name], msg: 'Field required', input: given });
      continue;
    }
    out[f.name] = checkValue(f.kind, given[f.name], ['body', f.name], errors);
  }
  if (errors.length > 0) throw new ValidationFailure(errors);
  return out;
}
