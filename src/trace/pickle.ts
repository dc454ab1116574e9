// A pickle reader for data only (DESIGN.md, "Hung jobs"): a flight-recorder dump is a pickle of dicts, lists,
// tuples, strings and numbers, and a pickle is a program. This reader runs the data opcodes (protocols 0-5) and
// refuses every opcode that would import or call anything (GLOBAL, STACK_GLOBAL, REDUCE, BUILD, INST, OBJ,
// NEWOBJ, NEWOBJ_EX, EXT*, PERSID, out-of-band buffers): one line naming the file and the opcode, exit 2, nothing
// called. Integers are exact: a number where it fits 2^53, else a BigInt (ns timestamps are past 2^53).
// npm's readers were weighed first: pickleparser 0.2.1 reads LONG1 as unsigned and loses ns precision,
// jpickle 0.4.1 reads every LONG as 0.
import { MAX_DEPTH } from "./limits.js";
import { TraceError } from "./model.js";

export type PickleValue = null | boolean | number | bigint | string | Uint8Array | PickleValue[] | PickleDict;
/** A dict: keys as strings (a dump's keys are strings and small ints), no prototype for a key to reach. */
export type PickleDict = { [key: string]: PickleValue };

/** Values one pickle may make (a dump of 2,000 entries makes some 60,000). */
const MAX_VALUES = 20_000_000;

/** Opcodes that import or call code, or reach outside the bytes: each is refused by name. */
const CODE: Record<number, string> = {
  0x63: "GLOBAL", 0x93: "STACK_GLOBAL", 0x52: "REDUCE", 0x62: "BUILD", 0x69: "INST", 0x6f: "OBJ", 0x81: "NEWOBJ",
  0x92: "NEWOBJ_EX", 0x82: "EXT1", 0x83: "EXT2", 0x84: "EXT4", 0x50: "PERSID", 0x51: "BINPERSID",
  0x97: "NEXT_BUFFER", 0x98: "READONLY_BUFFER",
};

const MARK = Symbol("mark");
type Slot = PickleValue | typeof MARK;

const isDict = (v: unknown): v is PickleDict => v !== null && typeof v === "object" && !Array.isArray(v) && !(v instanceof Uint8Array);

/** A little-endian two's-complement integer of any length, exact. */
function signedLE(bytes: Uint8Array): number | bigint {
  if (bytes.length === 0) return 0;
  let n = 0n;
  for (let i = bytes.length - 1; i >= 0; i--) n = (n << 8n) | BigInt(bytes[i]!);
  if (bytes[bytes.length - 1]! & 0x80) n -= 1n << BigInt(bytes.length * 8);
  return exact(n);
}

function exact(n: bigint): number | bigint {
  return n >= BigInt(Number.MIN_SAFE_INTEGER) && n <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(n) : n;
}

class Reader {
  private pos = 0;
  private readonly stack: Slot[] = [];
  private readonly memo = new Map<number, PickleValue>();
  private values = 0;
  private marks = 0;
  private readonly view: DataView;

  constructor(private readonly bytes: Uint8Array, private readonly file: string) {
    this.view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  }

  /** The offset of the opcode being run, which a message names. */
  private at = 0;

  private fail(detail: string): never {
    throw new TraceError(this.file, `pickle byte ${this.at}: ${detail}`);
  }

  private take(n: number | bigint): Uint8Array {
    const len = Number(n);
    if (!Number.isSafeInteger(len) || len < 0 || this.pos + len > this.bytes.length) this.fail(`a length of ${String(n)} runs past the end of the file`);
    const out = this.bytes.subarray(this.pos, this.pos + len);
    this.pos += len;
    return out;
  }

  private u8(): number { return this.take(1)[0]!; }
  private u16(): number { const p = this.pos; this.take(2); return this.view.getUint16(p, true); }
  private u32(): number { const p = this.pos; this.take(4); return this.view.getUint32(p, true); }
  private u64(): bigint { const p = this.pos; this.take(8); return this.view.getBigUint64(p, true); }

  /** A protocol-0 argument: the text up to the newline. */
  private line(): string {
    const end = this.bytes.indexOf(0x0a, this.pos);
    if (end < 0) this.fail("a text argument without its newline");
    const text = Buffer.from(this.bytes.subarray(this.pos, end)).toString("latin1");
    this.pos = end + 1;
    return text;
  }

  private push(v: PickleValue): void {
    if (++this.values > MAX_VALUES) this.fail(`more than ${MAX_VALUES} values (the reader's cap)`);
    this.stack.push(v);
  }

  private pop(): PickleValue {
    const v = this.stack.pop();
    if (v === undefined || v === MARK) this.fail("an opcode found the stack empty (a malformed pickle)");
    return v;
  }

  private top(): PickleValue {
    const v = this.stack.at(-1);
    if (v === undefined || v === MARK) this.fail("an opcode found the stack empty (a malformed pickle)");
    return v;
  }

  /** The items above the topmost MARK, which is removed. */
  private popMark(): PickleValue[] {
    const at = this.stack.lastIndexOf(MARK);
    if (at < 0) this.fail("no MARK for an opcode that needs one");
    const items = this.stack.splice(at) as PickleValue[];
    items.shift();
    this.marks--;
    return items;
  }

  private text(bytes: Uint8Array): string {
    return Buffer.from(bytes).toString("utf8");
  }

  private setItems(dict: PickleValue, items: PickleValue[]): void {
    if (!isDict(dict)) this.fail("SETITEM(S) on something not a dict");
    if (items.length % 2) this.fail("SETITEMS with an odd number of items");
    for (let i = 0; i < items.length; i += 2) {
      const k = items[i]!;
      if (typeof k !== "string" && typeof k !== "number" && typeof k !== "bigint" && typeof k !== "boolean" && k !== null) this.fail("a dict key that is not a string or number");
      dict[String(k)] = items[i + 1]!;
    }
  }

  private append(list: PickleValue, items: PickleValue[]): void {
    if (!Array.isArray(list)) this.fail("APPEND(S) on something not a list");
    for (const v of items) list.push(v);
  }

  private memoGet(key: number): void {
    if (!this.memo.has(key)) this.fail(`GET of memo ${key}, never put`);
    this.push(this.memo.get(key)!);
  }

  private dictOf(items: PickleValue[]): PickleDict {
    const d: PickleDict = Object.create(null) as PickleDict;
    this.setItems(d, items);
    return d;
  }

  read(): PickleValue {
    for (;;) {
      this.at = this.pos;
      const op = this.u8();
      if (Object.hasOwn(CODE, op)) this.fail(`opcode ${CODE[op]} would import or call code; a flight-recorder dump holds only data, so nothing was run`);
      switch (op) {
        case 0x80: this.u8(); break; // PROTO
        case 0x95: this.u64(); break; // FRAME: a length hint only
        case 0x2e: { // STOP
          const v = this.pop();
          return v;
        }
        case 0x28:
          if (++this.marks > MAX_DEPTH) this.fail(`nesting deeper than ${MAX_DEPTH}`);
          this.stack.push(MARK);
          break;
        case 0x7d: this.push(Object.create(null) as PickleDict); break; // EMPTY_DICT
        case 0x5d: case 0x8f: this.push([]); break; // EMPTY_LIST, EMPTY_SET (a set read as a list)
        case 0x29: this.push([]); break; // EMPTY_TUPLE
        case 0x74: case 0x6c: case 0x91: this.push(this.popMark()); break; // TUPLE, LIST, FROZENSET
        case 0x85: this.push([this.pop()]); break;
        case 0x86: { const b = this.pop(); const a = this.pop(); this.push([a, b]); break; }
        case 0x87: { const c = this.pop(); const b = this.pop(); const a = this.pop(); this.push([a, b, c]); break; }
        case 0x64: this.push(this.dictOf(this.popMark())); break; // DICT
        case 0x61: { const v = this.pop(); this.append(this.top(), [v]); break; } // APPEND
        case 0x65: case 0x90: { const items = this.popMark(); this.append(this.top(), items); break; } // APPENDS, ADDITEMS
        case 0x73: { const v = this.pop(); const k = this.pop(); this.setItems(this.top(), [k, v]); break; } // SETITEM
        case 0x75: { const items = this.popMark(); this.setItems(this.top(), items); break; } // SETITEMS
        case 0x4a: { const p = this.pos; this.take(4); this.push(this.view.getInt32(p, true)); break; } // BININT
        case 0x4b: this.push(this.u8()); break; // BININT1
        case 0x4d: this.push(this.u16()); break; // BININT2
        case 0x49: this.push(this.intText(this.line())); break; // INT (also "01"/"00" for True/False)
        case 0x4c: this.push(this.intText(this.line().replace(/L$/, ""))); break; // LONG
        case 0x8a: this.push(signedLE(this.take(this.u8()))); break; // LONG1
        case 0x8b: { // LONG4: a dump's integers fit 8 bytes; a long one would cost time quadratic in its length
          const n = this.u32();
          if (n > 64) this.fail(`an integer of ${n} bytes (the reader takes up to 64)`);
          this.push(signedLE(this.take(n)));
          break;
        }
        case 0x47: { const p = this.pos; this.take(8); this.push(this.view.getFloat64(p, false)); break; } // BINFLOAT
        case 0x46: this.push(Number(this.line())); break; // FLOAT
        case 0x4e: this.push(null); break;
        case 0x88: this.push(true); break;
        case 0x89: this.push(false); break;
        case 0x58: this.push(this.text(this.take(this.u32()))); break; // BINUNICODE
        case 0x8c: this.push(this.text(this.take(this.u8()))); break; // SHORT_BINUNICODE
        case 0x8d: this.push(this.text(this.take(this.u64()))); break; // BINUNICODE8
        case 0x56: this.push(this.line()); break; // UNICODE (raw-unicode-escape; dumps never use it)
        case 0x53: this.push(this.line().replace(/^(['"])(.*)\1$/s, "$2")); break; // STRING
        case 0x54: this.push(Buffer.from(this.take(this.u32())).toString("latin1")); break; // BINSTRING
        case 0x55: this.push(Buffer.from(this.take(this.u8())).toString("latin1")); break; // SHORT_BINSTRING
        case 0x42: this.push(this.take(this.u32()).slice()); break; // BINBYTES
        case 0x43: this.push(this.take(this.u8()).slice()); break; // SHORT_BINBYTES
        case 0x8e: case 0x96: this.push(this.take(this.u64()).slice()); break; // BINBYTES8, BYTEARRAY8
        case 0x71: this.memo.set(this.u8(), this.top()); break; // BINPUT
        case 0x72: this.memo.set(this.u32(), this.top()); break; // LONG_BINPUT
        case 0x70: this.memo.set(Number(this.line()), this.top()); break; // PUT
        case 0x94: this.memo.set(this.memo.size, this.top()); break; // MEMOIZE
        case 0x68: this.memoGet(this.u8()); break; // BINGET
        case 0x6a: this.memoGet(this.u32()); break; // LONG_BINGET
        case 0x67: this.memoGet(Number(this.line())); break; // GET
        case 0x30: if (this.stack.pop() === MARK) this.marks--; break; // POP
        case 0x31: this.popMark(); break; // POP_MARK
        case 0x32: this.push(this.top()); break; // DUP
        default: this.fail(`unknown opcode 0x${op.toString(16).padStart(2, "0")}`);
      }
    }
  }

  private intText(text: string): number | bigint | boolean {
    if (text === "01") return true;
    if (text === "00") return false;
    if (!/^-?\d{1,4300}$/.test(text)) this.fail(`an integer written ${JSON.stringify(text.slice(0, 40))}`);
    return exact(BigInt(text));
  }
}

/** The value a pickle holds, made by its data opcodes only; a code opcode or a malformed pickle is one line (exit 2). */
export function readPickle(bytes: Uint8Array, file: string): PickleValue {
  return new Reader(bytes, file).read();
}

/** A pickle's first bytes: PROTO 2-5, or a protocol-0/1 pickle's opening MARK / EMPTY_DICT. */
export function looksLikePickle(head: Uint8Array): boolean {
  return (head[0] === 0x80 && head[1] !== undefined && head[1] >= 2 && head[1] <= 5) || head[0] === 0x7d || head[0] === 0x28;
}
