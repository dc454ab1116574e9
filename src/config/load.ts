import * as jsonc from "jsonc-parser";
import * as z from "zod";
import { ConfigError, configErrorFromZod, issueMessage } from "./errors.js";
import { jobSchema, type Job } from "./job.js";
import { readInputText } from "./read-input.js";
import { runConfigSchema, type RunConfig } from "./run-config.js";

// A process parses a job and a configuration once: zod's JIT, which writes a parser for each object schema at
// its first parse, costs a rank more at start-up than it could save.
z.config({ jitless: true });

/** Deeper than any job or configuration needs, and shallow enough for the parser's recursion. */
const MAX_NESTING = 256;

/** The delimiters a container's items are separated and closed by, for messages. */
interface Container {
  close: "}" | "]";
  what: string;
}

/** The first syntax error in `text` as the user would put it, and where it is; undefined for valid JSON. */
function firstSyntaxError(text: string): { offset: number; message: string } | undefined {
  const open: Container[] = [];
  let rootEnd = -1, found: { offset: number; message: string } | undefined;
  const token = (offset: number): string => {
    if (offset >= text.length) return "end of file";
    const word = /^[A-Za-z0-9_.+-]+/.exec(text.slice(offset, offset + 40));
    return JSON.stringify(word ? word[0] : text[offset]);
  };
  // An expected name or value where the container closes: the comma before it is the mistake.
  const trailingComma = (offset: number): { offset: number; message: string } | undefined => {
    const before = text.slice(0, offset).trimEnd();
    const close = text[offset];
    return before.endsWith(",") && (close === "}" || close === "]")
      ? { offset: before.length - 1, message: `trailing comma before "${close}"` }
      : undefined;
  };
  const describe = (code: jsonc.ParseErrorCode, offset: number, length: number): { offset: number; message: string } => {
    const got = token(offset);
    const inside = open.at(-1);
    switch (code) {
      case jsonc.ParseErrorCode.InvalidSymbol:
      case jsonc.ParseErrorCode.EndOfFileExpected:
        return { offset, message: rootEnd >= 0 && open.length === 0 ? `unexpected ${got} after the end of the document` : `unexpected ${got}, expected a value` };
      case jsonc.ParseErrorCode.PropertyNameExpected:
        return trailingComma(offset) ?? { offset, message: `expected a double-quoted property name, got ${got}` };
      case jsonc.ParseErrorCode.ValueExpected:
        return trailingComma(offset) ?? { offset, message: `unexpected ${got}, expected a value` };
      case jsonc.ParseErrorCode.ColonExpected:
        return { offset, message: `expected ":" after a property name, got ${got}` };
      case jsonc.ParseErrorCode.CommaExpected:
      case jsonc.ParseErrorCode.CloseBraceExpected:
      case jsonc.ParseErrorCode.CloseBracketExpected:
        return { offset, message: inside ? `expected "," or "${inside.close}" after ${inside.what}, got ${got}` : `unexpected ${got}` };
      case jsonc.ParseErrorCode.InvalidNumberFormat:
      case jsonc.ParseErrorCode.UnexpectedEndOfNumber:
        return { offset, message: `invalid number ${got}` };
      case jsonc.ParseErrorCode.UnexpectedEndOfString: {
        const lineBreak = text.slice(offset, offset + length + 1).search(/[\r\n]/);
        return lineBreak >= 0 ? { offset: offset + lineBreak, message: "line break inside a string" } : { offset, message: "unterminated string" };
      }
      case jsonc.ParseErrorCode.InvalidCharacter:
        return { offset, message: "control character inside a string" };
      case jsonc.ParseErrorCode.InvalidUnicode:
      case jsonc.ParseErrorCode.InvalidEscapeCharacter:
        return { offset, message: "invalid escape sequence in a string" };
      default:
        return { offset, message: `comments are not allowed in JSON` };
    }
  };
  const enter = (container: Container, offset: number): void => {
    open.push(container);
    if (open.length > MAX_NESTING) found ??= { offset, message: `nested deeper than ${MAX_NESTING} levels` };
  };
  try {
    visitJson(text, enter, open, (end) => (rootEnd = end), (error) => (found ??= describe(error.code, error.offset, error.length)));
  } catch (error) {
    // The parser recurses per level: a document nested far deeper than MAX_NESTING ends its stack.
    if (!(error instanceof RangeError) || !found) throw error;
  }
  return found;
}

function visitJson(
  text: string,
  enter: (container: Container, offset: number) => void,
  open: Container[],
  atRootEnd: (end: number) => void,
  onError: (error: { code: jsonc.ParseErrorCode; offset: number; length: number }) => void,
): void {
  const leave = (offset: number, length: number): void => {
    open.pop();
    if (open.length === 0) atRootEnd(offset + length);
  };
  jsonc.visit(text, {
    onObjectBegin: (offset) => enter({ close: "}", what: "a property value" }, offset),
    onArrayBegin: (offset) => enter({ close: "]", what: "an array element" }, offset),
    onObjectEnd: leave,
    onArrayEnd: leave,
    onLiteralValue: (_, offset, length) => void (open.length === 0 && atRootEnd(offset + length)),
    onError: (code, offset, length) => onError({ code, offset, length }),
  }, { disallowComments: true, allowTrailingComma: false });
}

function lineColumn(text: string, offset: number): string {
  const before = text.slice(0, offset).split("\n");
  return `line ${before.length} column ${before[before.length - 1]!.length + 1}`;
}

/** Editors on Windows may save a byte-order mark, which JSON.parse rejects. */
function withoutBom(text: string): string {
  return text.startsWith("\uFEFF") ? text.slice(1) : text;
}

function parseJsonText(body: string, file: string): unknown {
  try {
    return JSON.parse(body);
  } catch (error) {
    // Should the parser ever accept what V8 rejected, V8's message is still better than none.
    const found = firstSyntaxError(body);
    const where = found ? `${lineColumn(body, found.offset)}: ` : "";
    throw new ConfigError(file, "", `${where}invalid JSON: ${found?.message ?? (error as Error).message}`);
  }
}

/**
 * Where the value at `path` starts in the text, or the key of `unknownKey` inside it, or, for a value that
 * is missing, the object that should hold it.
 */
function positionOf(body: string, path: readonly PropertyKey[], unknownKey: string | undefined): string | undefined {
  let root: jsonc.Node | undefined;
  try {
    // Comments allowed: a JSON file has none (JSON.parse passed it), a JSONC file may.
    root = jsonc.parseTree(body, [], { disallowComments: false, allowTrailingComma: true });
  } catch {
    return undefined;  // nested too deep for the parser's recursion: the message still names the path
  }
  if (!root) return undefined;
  const segments = path.filter((k): k is string | number => typeof k === "string" || typeof k === "number");
  for (let n = segments.length; n >= 0; n--) {
    const node = jsonc.findNodeAtLocation(root, segments.slice(0, n));
    if (!node) continue;
    const key = n === segments.length && unknownKey !== undefined ? jsonc.findNodeAtLocation(node, [unknownKey])?.parent : undefined;
    return lineColumn(body, (key ?? node).offset);
  }
  return undefined;
}

function parseWith<S extends z.ZodType>(schema: S, text: string, file: string): z.output<S> {
  const body = withoutBom(text);
  const result = schema.safeParse(parseJsonText(body, file), { error: issueMessage });
  if (!result.success) throw configErrorFromZod(file, result.error, (path, unknownKey) => positionOf(body, path, unknownKey));
  return result.data;
}

/**
 * JSON with comments and trailing commas (experiment files): the first syntax error, or the first schema
 * problem, as one line naming the file, its position and the JSON path.
 */
export function parseCommentedWith<S extends z.ZodType>(schema: S, text: string, file: string): z.output<S> {
  const body = withoutBom(text);
  const errors: jsonc.ParseError[] = [];
  const data: unknown = jsonc.parse(body, errors, { allowTrailingComma: true });
  if (errors.length) {
    throw new ConfigError(file, "", `invalid JSON: ${jsonc.printParseErrorCode(errors[0]!.error)}`, lineColumn(body, errors[0]!.offset));
  }
  const result = schema.safeParse(data, { error: issueMessage });
  if (!result.success) throw configErrorFromZod(file, result.error, (path, unknownKey) => positionOf(body, path, unknownKey));
  return result.data;
}

/** Schema-checks a job; the graph checks (tensor names, cycles, roots) are graph/validate.ts. */
export function parseJob(text: string, file: string): Job {
  return parseWith(jobSchema, text, file);
}

export function loadJob(path: string): Job {
  return parseJob(readInputText(path), path);
}

export function parseRunConfig(text: string, file: string): RunConfig {
  return parseWith(runConfigSchema, text, file);
}

/** Without a path, the defaults. */
export function loadRunConfig(path?: string): RunConfig {
  return path === undefined ? runConfigSchema.parse({}) : parseRunConfig(readInputText(path), path);
}
