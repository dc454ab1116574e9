import * as z from "zod";

/** A bad job or run-configuration file: one line naming the file, the JSON path and the problem. */
export class ConfigError extends Error {
  readonly exitCode = 2;

  constructor(
    readonly file: string,
    readonly jsonPath: string,
    detail: string,
    /** "line 3 column 9", where the file has it. */
    readonly position?: string,
  ) {
    super([file, position, jsonPath, detail].filter(Boolean).join(": "));
    this.name = "ConfigError";
  }
}

const IDENTIFIER = /^[A-Za-z_$][A-Za-z0-9_$]*$/;

/** `stages[2].root`, `tensors.grad.count`, `tensors["my grad"]`; the document root is "". */
export function formatJsonPath(path: readonly PropertyKey[]): string {
  let out = "";
  for (const key of path) {
    if (typeof key === "number") out += `[${key}]`;
    else if (typeof key === "string" && IDENTIFIER.test(key)) out += out ? `.${key}` : key;
    else out += `[${JSON.stringify(String(key))}]`;
  }
  return out;
}

/** A value as a user would recognise it from the file, kept short so messages stay on one line. */
export function describeValue(value: unknown): string {
  if (value === null) return "null";
  if (Array.isArray(value)) return "an array";
  if (typeof value === "object") return "an object";
  if (typeof value === "string") {
    const shown = value.length > 40 ? `${value.slice(0, 40)}...` : value;
    return JSON.stringify(shown);
  }
  return String(value);
}

export function quoteList(values: readonly unknown[]): string {
  return values.map((v) => JSON.stringify(v)).join(", ");
}

const TYPE_NAMES: Record<string, string> = {
  string: "a string",
  number: "a number",
  int: "an integer",
  boolean: "true or false",
  object: "an object",
  array: "an array",
};

function expectedType(name: string): string {
  return TYPE_NAMES[name] ?? name;
}

/** "1 rank", "4 ranks". */
export function plural(n: number | bigint, word: string): string {
  return `${n} ${word}${n === 1 ? "" : "s"}`;
}

const UNIT_BY_ORIGIN: Record<string, string> = { array: "item", string: "character" };

function bound(kind: "least" | "most", limit: number | bigint, inclusive: boolean | undefined, origin: string, input: unknown): string {
  const unit = UNIT_BY_ORIGIN[origin];
  if (unit) {
    const length = (input as { length: number }).length;
    return `expected at ${kind} ${plural(limit, unit)}, got ${length}`;
  }
  const relation = inclusive === false ? (kind === "least" ? "more than" : "less than") : `at ${kind}`;
  return `expected ${relation} ${limit}, got ${describeValue(input)}`;
}

function editDistance(a: string, b: string): number {
  let previous = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const current = [i];
    for (let j = 1; j <= b.length; j++) {
      const substitution = previous[j - 1] + (a[i - 1] === b[j - 1] ? 0 : 1);
      current.push(Math.min(previous[j] + 1, current[j - 1] + 1, substitution));
    }
    previous = current;
  }
  return previous[b.length];
}

/** The candidate a mistyped word was most likely meant to be (at most `edits` away, case aside), if any. */
export function closest(word: string, candidates: readonly string[], edits = Math.max(2, Math.floor(word.length / 3))): string | undefined {
  let best: string | undefined;
  let bestDistance = edits + 1;
  for (const candidate of candidates) {
    const distance = editDistance(word.toLowerCase(), candidate.toLowerCase());
    if (distance < bestDistance) [best, bestDistance] = [candidate, distance];
  }
  return best;
}

function unknownKeys(keys: readonly string[], inst: unknown): string {
  if (keys.length > 1) return `unknown keys ${quoteList(keys)}`;
  const shape = (inst as { _zod?: { def?: { shape?: object } } } | undefined)?._zod?.def?.shape;
  const suggestion = shape && closest(keys[0], Object.keys(shape));
  return `unknown key ${JSON.stringify(keys[0])}${suggestion ? ` (did you mean ${JSON.stringify(suggestion)}?)` : ""}`;
}

/** A name for a schema in a union's message where its parts would say less ("size" for 4096 or "4Ki"). */
export const FORMS = z.registry<{ form: string }>();

/** A schema as a job file writes it: {"split": "host"|"across"}, {"block": n}, [[n, ...], ...]. */
function form(schema: z.core.$ZodType): string {
  const named = FORMS.get(schema)?.form;
  if (named) return named;
  // zod's def types differ by kind; only the fields read below are used.
  const def = schema._zod.def as unknown as Record<string, any>;
  switch (def.type) {
    case "object":
      return `{${Object.entries(def.shape as Record<string, z.core.$ZodType>).filter(([, v]) => v._zod.optin !== "optional").map(([k, v]) => `${JSON.stringify(k)}: ${form(v)}`).join(", ")}}`;
    case "enum":
      return Object.values(def.entries).map((v) => JSON.stringify(v)).join("|");
    case "literal":
      return (def.values as unknown[]).map((v) => JSON.stringify(v)).join("|");
    case "array":
      return `[${form(def.element)}, ...]`;
    case "union":
      return (def.options as z.core.$ZodType[]).map(form).join("|");
    case "number":
      return "n";
    case "string":
      return '"..."';
    case "boolean":
      return "true|false";
    case "pipe":
      return form(def.in);
    case "optional":
    case "default":
      return form(def.innerType);
    default:
      return "...";
  }
}

/**
 * What a plain union accepts: "a string or a number" where its branches are plain values, else each branch as
 * the job file writes it: a group is {"split": "host"|"across"}, {"block": n}, ... where zod said "an object or
 * an object or an object or an object".
 */
function unionAlternatives(inst: unknown): string | undefined {
  const options = (inst as { _zod?: { def?: { options?: z.core.$ZodType[] } } } | undefined)?._zod?.def?.options;
  if (!options) return undefined;
  const plain = options.every((o) => ["string", "number", "boolean", "literal", "enum"].includes(o._zod.def.type) && !FORMS.has(o));
  if (plain) return options.map((o) => (o._zod.def.type === "literal" || o._zod.def.type === "enum" ? form(o) : expectedType(o._zod.def.type))).join(" or ");
  const forms = options.map(form);
  return `${forms.slice(0, -1).join(", ")} or ${forms.at(-1)}`;
}

/**
 * Per-parse zod error map: human one-line messages for every issue our schemas can raise.
 * Schemas that need their own wording (sizes, names) carry it themselves and win over this.
 */
export function issueMessage(issue: z.core.$ZodRawIssue): string | undefined {
  const input = issue.input;
  switch (issue.code) {
    case "invalid_type":
      return input === undefined
        ? `missing, expected ${expectedType(issue.expected)}`
        : `expected ${expectedType(issue.expected)}, got ${describeValue(input)}`;
    case "unrecognized_keys":
      return unknownKeys(issue.keys, issue.inst);
    case "invalid_value": {
      const got = `got ${describeValue(input)}`;
      if (issue.values.length === 1) return `expected ${JSON.stringify(issue.values[0])}, ${got}`;
      return `expected one of ${quoteList(issue.values)}, ${got}`;
    }
    case "invalid_union": {
      // zod's raw-issue type flattens these fields to {}; at run time they are as documented.
      const { discriminator, options = [] } = issue as unknown as { discriminator?: string; options?: unknown[] };
      if (discriminator !== undefined) {
        const expected = `expected one of ${quoteList(options)}`;
        const value = (input as Record<string, unknown>)[discriminator];
        return value === undefined ? `missing, ${expected}` : `unknown ${discriminator} ${describeValue(value)}, ${expected}`;
      }
      const alternatives = unionAlternatives(issue.inst);
      return alternatives ? `expected ${alternatives}, got ${describeValue(input)}` : undefined;
    }
    case "too_small":
      return bound("least", issue.minimum, issue.inclusive, issue.origin, input);
    case "too_big":
      return bound("most", issue.maximum, issue.inclusive, issue.origin, input);
    case "invalid_key":
      return issue.issues[0]?.message;
    default:
      return undefined;
  }
}

/**
 * A union whose every branch failed hides where the value went wrong; follow the branch that
 * got past the type check (e.g. the {from, to} form of a sweep) so the path points inside it.
 */
function innermost(issue: z.core.$ZodIssue): z.core.$ZodIssue {
  if (issue.code !== "invalid_union" || issue.discriminator !== undefined) return issue;
  // Only a branch the value went into: none with a key it does not know ({"size": 2} against each form of a group).
  const deeper = issue.errors
    .filter((branch) => !branch.some((i) => i.code === "unrecognized_keys" && i.path.length === 0))
    .map((branch) => branch[0])
    .filter((first) => first && (first.path.length > 0 || (first.code !== "invalid_type" && first.code !== "invalid_value")));
  if (deeper.length === 0) return issue;
  const chosen = deeper.reduce((a, b) => (b.path.length > a.path.length ? b : a));
  return innermost({ ...chosen, path: [...issue.path, ...chosen.path] });
}

/** The first problem of a failed parse as a ConfigError. */
/** Where in the file the value at `path` is ("line 3 column 9"), or the key `unknownKey` inside it. */
export type Locate = (path: readonly PropertyKey[], unknownKey?: string) => string | undefined;

export function configErrorFromZod(file: string, error: z.ZodError, locate?: Locate): ConfigError {
  // A misspelt key is also reported as a missing one; the unknown key is the real cause.
  const first = error.issues.find((i) => i.code === "unrecognized_keys") ?? error.issues[0];
  const issue = innermost(first);
  const unknownKey = issue.code === "unrecognized_keys" ? issue.keys[0] : undefined;
  return new ConfigError(file, formatJsonPath(issue.path), issue.message, locate?.(issue.path, unknownKey));
}
