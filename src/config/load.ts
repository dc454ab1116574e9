import { readFileSync } from "node:fs";
import type { z } from "zod";
import { ConfigError, configErrorFromZod, issueMessage } from "./errors.js";
import { jobSchema, type Job } from "./job.js";
import { runConfigSchema, type RunConfig } from "./run-config.js";

/** A syntax error found by JsonScanner: V8's own messages carry no position on some Node versions. */
class JsonSyntaxError extends Error {
  constructor(
    readonly offset: number,
    message: string,
  ) {
    super(message);
  }
}

/** Deeper than any job or configuration needs, and shallow enough for the scanner's recursion. */
const MAX_NESTING = 256;

/** Re-reads text that JSON.parse rejected, to say where and why in the user's terms. */
class JsonScanner {
  private pos = 0;
  private depth = 0;

  constructor(private readonly text: string) {}

  /** The first syntax error in the text, or undefined if it is valid JSON. */
  firstError(): JsonSyntaxError | undefined {
    try {
      this.value();
      this.skipSpace();
      if (this.pos < this.text.length) this.fail(`unexpected ${this.token()} after the end of the document`);
      return undefined;
    } catch (error) {
      if (error instanceof JsonSyntaxError) return error;
      throw error;
    }
  }

  private fail(message: string, offset = this.pos): never {
    throw new JsonSyntaxError(offset, message);
  }

  /** The offending token as the user typed it: a word, one character, or the end. */
  private token(): string {
    if (this.pos >= this.text.length) return "end of file";
    const word = /^[A-Za-z0-9_.+-]+/.exec(this.text.slice(this.pos, this.pos + 40));
    return JSON.stringify(word ? word[0] : this.text[this.pos]);
  }

  private skipSpace(): void {
    while (/[ \t\n\r]/.test(this.text[this.pos] ?? "")) this.pos++;
  }

  private value(): void {
    this.skipSpace();
    const c = this.text[this.pos];
    if (c === "{") return this.container("}", "a property value", () => this.property());
    if (c === "[") return this.container("]", "an array element", () => this.value());
    if (c === '"') return this.string();
    if (c === "-" || (c >= "0" && c <= "9")) return this.number();
    for (const literal of ["true", "false", "null"]) {
      if (this.text.startsWith(literal, this.pos) && !/[A-Za-z0-9_]/.test(this.text[this.pos + literal.length] ?? "")) {
        this.pos += literal.length;
        return;
      }
    }
    this.fail(`unexpected ${this.token()}, expected a value`);
  }

  private container(close: string, what: string, item: () => void): void {
    if (++this.depth > MAX_NESTING) this.fail(`nested deeper than ${MAX_NESTING} levels`);
    this.pos++;
    this.skipSpace();
    if (this.text[this.pos] === close) {
      this.pos++;
      this.depth--;
      return;
    }
    for (;;) {
      item();
      this.skipSpace();
      if (this.text[this.pos] === close) {
        this.pos++;
        this.depth--;
        return;
      }
      if (this.text[this.pos] !== ",") this.fail(`expected "," or "${close}" after ${what}, got ${this.token()}`);
      const comma = this.pos++;
      this.skipSpace();
      if (this.text[this.pos] === close) this.fail(`trailing comma before "${close}"`, comma);
    }
  }

  private property(): void {
    this.skipSpace();
    if (this.text[this.pos] !== '"') this.fail(`expected a double-quoted property name, got ${this.token()}`);
    this.string();
    this.skipSpace();
    if (this.text[this.pos] !== ":") this.fail(`expected ":" after a property name, got ${this.token()}`);
    this.pos++;
    this.value();
  }

  private string(): void {
    const start = this.pos++;
    while (this.pos < this.text.length) {
      const c = this.text[this.pos];
      if (c === '"') {
        this.pos++;
        return;
      }
      if (c < " ") this.fail(c === "\n" ? "line break inside a string" : "control character inside a string");
      if (c === "\\" && !/^\\(["\\/bfnrt]|u[0-9A-Fa-f]{4})/.test(this.text.slice(this.pos, this.pos + 6))) {
        this.fail("invalid escape sequence in a string");
      }
      this.pos += c === "\\" ? 2 : 1;
    }
    this.fail("unterminated string", start);
  }

  private number(): void {
    const match = /^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?/.exec(this.text.slice(this.pos));
    if (!match || /[A-Za-z0-9.]/.test(this.text[this.pos + match[0].length] ?? "")) this.fail(`invalid number ${this.token()}`);
    this.pos += match[0].length;
  }
}

function lineColumn(text: string, offset: number): string {
  const before = text.slice(0, offset).split("\n");
  return `line ${before.length} column ${before[before.length - 1].length + 1}`;
}

function parseJsonText(text: string, file: string): unknown {
  // Editors on Windows may save a byte-order mark, which JSON.parse rejects.
  const body = text.startsWith("\uFEFF") ? text.slice(1) : text;
  try {
    return JSON.parse(body);
  } catch (error) {
    // Should the scanner ever accept what V8 rejected, V8's message is still better than none.
    const found = new JsonScanner(body).firstError();
    const where = found ? `${lineColumn(body, found.offset)}: ` : "";
    throw new ConfigError(file, "", `${where}invalid JSON: ${(found ?? (error as Error)).message}`);
  }
}

function parseWith<S extends z.ZodType>(schema: S, text: string, file: string): z.output<S> {
  const result = schema.safeParse(parseJsonText(text, file), { error: issueMessage });
  if (!result.success) throw configErrorFromZod(file, result.error);
  return result.data;
}

function readText(file: string): string {
  try {
    return readFileSync(file, "utf8");
  } catch (error) {
    // "ENOENT: no such file or directory, open 'x.json'" -> the part before the repeated path.
    const reason = (error as Error).message.replace(/, \w+( '.*')?$/, "");
    throw new ConfigError(file, "", `cannot read file: ${reason}`);
  }
}

/** Schema-checks a job; the graph checks (tensor names, cycles, roots) are graph/validate.ts. */
export function parseJob(text: string, file: string): Job {
  return parseWith(jobSchema, text, file);
}

export function loadJob(path: string): Job {
  return parseJob(readText(path), path);
}

export function parseRunConfig(text: string, file: string): RunConfig {
  return parseWith(runConfigSchema, text, file);
}

/** Without a path, the defaults. */
export function loadRunConfig(path?: string): RunConfig {
  return path === undefined ? runConfigSchema.parse({}) : parseRunConfig(readText(path), path);
}
