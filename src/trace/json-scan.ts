// A JSON trace read as it streams in, never as one string: the top-level object's values are parsed one by
// one, and the lists that hold a trace's bulk (ET's "nodes", Kineto's "traceEvents") element by element, each
// handed to `onElement`, which keeps what the reader needs. Nesting, one value's size and the whole are capped
// (limits.ts): the scanner keeps a depth counter, not a stack, so no file can make it recurse.
import { MAX_DEPTH, MAX_VALUE_BYTES } from "./limits.js";
import { TraceError } from "./model.js";

const enum Phase {
  Doc, Key, AfterKey, Colon, ValueStart, Value, AfterValue, ArrayStart, ArrayNext, Element, End,
}

const WS = new Uint8Array(256);
for (const c of [0x20, 0x09, 0x0a, 0x0d]) WS[c] = 1;
const QUOTE = 0x22, BACKSLASH = 0x5c, COMMA = 0x2c, COLON = 0x3a;
const OPEN_OBJ = 0x7b, CLOSE_OBJ = 0x7d, OPEN_ARR = 0x5b, CLOSE_ARR = 0x5d;

export interface ScanOptions {
  file: string;
  /** Top-level keys whose list is handed over element by element. */
  split: ReadonlySet<string>;
  onElement(key: string, index: number, value: unknown): void;
}

export class JsonScanner {
  private phase = Phase.Doc;
  private depth = 0;
  private inString = false;
  private escaped = false;
  private parts: Buffer[] = [];
  private captured = 0;
  /** Index in the current chunk where the capture started (-1: none running). */
  private from = -1;
  private key = "";
  private index = 0;
  private offset = 0;
  private bomChecked = false;
  readonly top: Record<string, unknown> = Object.create(null) as Record<string, unknown>;

  constructor(private readonly o: ScanOptions) {}

  private fail(detail: string, at: number): never {
    throw new TraceError(this.o.file, `${detail} (at byte ${this.offset + at})`);
  }

  private startCapture(i: number): void {
    this.parts = [];
    this.captured = 0;
    this.from = i;
  }

  /** The captured bytes up to (not including) index `i` of `chunk`, parsed. */
  private finishCapture(chunk: Buffer, i: number, what: string): unknown {
    this.parts.push(chunk.subarray(this.from, i));
    this.captured += i - this.from;
    this.from = -1;
    if (this.captured > MAX_VALUE_BYTES) this.fail(`${what} is larger than ${MAX_VALUE_BYTES / 1024 ** 2} MiB`, i);
    const text = (this.parts.length === 1 ? this.parts[0]! : Buffer.concat(this.parts)).toString("utf8");
    this.parts = [];
    try {
      return JSON.parse(text);
    } catch (error) {
      return this.fail(`not JSON: ${(error as Error).message.replace(/, ".*" is not valid JSON$/s, "")} in ${what}`, i);
    }
  }

  /** Scans one chunk; throws TraceError on anything that is not JSON of the expected shape. */
  write(chunk: Buffer): void {
    let i = 0;
    const n = chunk.length;
    if (!this.bomChecked && n > 0) {
      this.bomChecked = true;
      if (n >= 3 && chunk[0] === 0xef && chunk[1] === 0xbb && chunk[2] === 0xbf) i = 3;
    }
    while (i < n) {
      const c = chunk[i]!;
      if (this.inString) {
        // Inside a string only the closing quote matters; a backslash hides the next byte.
        if (this.escaped) this.escaped = false;
        else if (c === BACKSLASH) this.escaped = true;
        else if (c === QUOTE) {
          this.inString = false;
          if (this.phase === Phase.Key) {
            this.key = String(this.finishCapture(chunk, i + 1, "a key"));
            this.phase = Phase.Colon;
          }
        }
        i++;
        continue;
      }
      switch (this.phase) {
        case Phase.Doc:
          if (WS[c]) break;
          if (c === OPEN_OBJ) {
            this.depth = 1;
            this.phase = Phase.AfterKey;
            break;
          }
          this.fail(c === OPEN_ARR ? "not a trace: expected a JSON object, found a list" : "not JSON: expected a JSON object", i);
        // falls through (fail throws)
        case Phase.AfterKey: // after "{" or ",": a key, or "}" right after "{"
        case Phase.Key:
          if (WS[c]) break;
          if (c === QUOTE) {
            this.startCapture(i);
            this.inString = true;
            this.phase = Phase.Key;
            break;
          }
          if (c === CLOSE_OBJ && this.phase === Phase.AfterKey) {
            this.depth = 0;
            this.phase = Phase.End;
            break;
          }
          this.fail("not JSON: expected a key", i);
        // falls through
        case Phase.Colon:
          if (WS[c]) break;
          if (c !== COLON) this.fail("not JSON: expected ':' after a key", i);
          this.phase = Phase.ValueStart;
          break;
        case Phase.ValueStart:
          if (WS[c]) break;
          if (c === OPEN_ARR && this.o.split.has(this.key)) {
            this.depth = 2;
            this.index = 0;
            this.phase = Phase.ArrayStart;
            this.top[this.key] = true;
            break;
          }
          this.startCapture(i);
          this.phase = Phase.Value;
          continue; // the value's first byte is scanned as part of it
        case Phase.ArrayStart: // after "[": an element or "]"
        case Phase.ArrayNext: // after ",": an element
          if (WS[c]) break;
          if (c === CLOSE_ARR && this.phase === Phase.ArrayStart) {
            this.depth = 1;
            this.phase = Phase.AfterValue;
            break;
          }
          this.startCapture(i);
          this.phase = Phase.Element;
          continue;
        case Phase.AfterValue:
          if (WS[c]) break;
          if (c === COMMA) this.phase = Phase.Key;
          else if (c === CLOSE_OBJ) {
            this.depth = 0;
            this.phase = Phase.End;
          } else this.fail("not JSON: expected ',' or '}' after a value", i);
          break;
        case Phase.End:
          if (!WS[c]) this.fail("not JSON: more after the document's end", i);
          break;
        case Phase.Value:
        case Phase.Element: {
          const base = this.phase === Phase.Value ? 1 : 2;
          if (c === QUOTE) this.inString = true;
          else if (c === OPEN_OBJ || c === OPEN_ARR) {
            if (++this.depth > MAX_DEPTH) this.fail(`nested deeper than ${MAX_DEPTH} levels`, i);
          } else if (c === CLOSE_OBJ || c === CLOSE_ARR || c === COMMA) {
            if (this.depth > base) {
              if (c !== COMMA) this.depth--;
            } else if (this.phase === Phase.Value) {
              this.top[this.key] = this.finishCapture(chunk, i, `the value of ${JSON.stringify(this.key)}`);
              if (c === CLOSE_ARR) this.fail("not JSON: ']' closes the document's object", i);
              this.phase = c === COMMA ? Phase.Key : Phase.End;
              if (c === CLOSE_OBJ) this.depth = 0;
            } else {
              const value = this.finishCapture(chunk, i, `element ${this.index} of "${this.key}"`);
              if (c === CLOSE_OBJ) this.fail(`not JSON: '}' closes the list "${this.key}"`, i);
              this.o.onElement(this.key, this.index++, value);
              if (c === CLOSE_ARR) {
                this.depth = 1;
                this.phase = Phase.AfterValue;
              } else this.phase = Phase.ArrayNext;
            }
          }
          break;
        }
      }
      i++;
    }
    // What is being captured goes on in the next chunk.
    if (this.from >= 0) {
      this.parts.push(chunk.subarray(this.from, n));
      this.captured += n - this.from;
      this.from = 0;
      if (this.captured > MAX_VALUE_BYTES) this.fail(`one value is larger than ${MAX_VALUE_BYTES / 1024 ** 2} MiB`, n);
    }
    this.offset += n;
  }

  /** The top-level object's values (split lists as `true`); throws where the document was cut short. */
  end(): Record<string, unknown> {
    if (this.phase !== Phase.End) {
      throw new TraceError(this.o.file, this.phase === Phase.Doc ? "empty: no JSON document" : "not JSON: the document ends early (cut short?)");
    }
    return this.top;
  }
}
