// A small pickle writer (protocol 2) for the flight-recorder tests: dicts, lists, tuples (Tuple), strings,
// ints (BigInt past 2^31, as LONG1), floats, None, bools: the data opcodes a PyTorch dump uses.
export class Tuple {
  constructor(items) {
    this.items = items;
  }
}

function signedLE(n) {
  const bytes = [];
  let v = BigInt(n);
  for (;;) {
    const b = Number(v & 0xffn);
    bytes.push(b);
    v >>= 8n;
    if ((v === 0n && !(b & 0x80)) || (v === -1n && b & 0x80)) return Buffer.from(bytes);
  }
}

function write(v, out) {
  if (v === null || v === undefined) out.push(Buffer.from("N"));
  else if (v === true) out.push(Buffer.from([0x88]));
  else if (v === false) out.push(Buffer.from([0x89]));
  else if (typeof v === "string") {
    const b = Buffer.from(v, "utf8");
    const len = Buffer.alloc(4);
    len.writeUInt32LE(b.length);
    out.push(Buffer.from("X"), len, b);
  } else if (typeof v === "bigint" || (typeof v === "number" && Number.isInteger(v))) {
    if (typeof v === "number" && v >= -(2 ** 31) && v < 2 ** 31) {
      const b = Buffer.alloc(5);
      b[0] = 0x4a;
      b.writeInt32LE(v, 1);
      out.push(b);
    } else {
      const b = signedLE(v);
      out.push(Buffer.from([0x8a, b.length]), b);
    }
  } else if (typeof v === "number") {
    const b = Buffer.alloc(9);
    b[0] = 0x47;
    b.writeDoubleBE(v, 1);
    out.push(b);
  } else if (v instanceof Tuple) {
    out.push(Buffer.from("("));
    for (const x of v.items) write(x, out);
    out.push(Buffer.from("t"));
  } else if (Array.isArray(v)) {
    out.push(Buffer.from("]("));
    for (const x of v) write(x, out);
    out.push(Buffer.from("e"));
  } else {
    out.push(Buffer.from("}("));
    for (const [k, x] of Object.entries(v)) {
      write(k, out);
      write(x, out);
    }
    out.push(Buffer.from("u"));
  }
}

/** `value` as a protocol-2 pickle. */
export function pickle(value) {
  const out = [Buffer.from([0x80, 0x02])];
  write(value, out);
  out.push(Buffer.from("."));
  return Buffer.concat(out);
}
