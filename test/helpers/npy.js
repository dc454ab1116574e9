// Reads the 1-D .npy files the runner dumps, as plain numbers (float16/bfloat16 decoded).
import { readFileSync } from "node:fs";

function half(h) {
  const sign = h & 0x8000 ? -1 : 1, exp = (h >> 10) & 0x1f, man = h & 0x3ff;
  if (exp === 0) return sign * man * 2 ** -24;
  if (exp === 31) return man ? NaN : sign * Infinity;
  return sign * (1 + man / 1024) * 2 ** (exp - 15);
}

function bf16(b) {
  const f = new Float32Array(1);
  new Uint32Array(f.buffer)[0] = b << 16;
  return f[0];
}

/** `typed`: float32/float64 values as the typed array itself (large dumps), not a plain array. */
export function readNpy(file, { bfloat16 = false, typed = false } = {}) {
  const buf = readFileSync(file);
  if (buf.toString("latin1", 0, 6) !== "\x93NUMPY") throw new Error(`${file}: not a .npy file`);
  const headerLen = buf.readUInt16LE(8);
  const header = buf.toString("latin1", 10, 10 + headerLen);
  const descr = /'descr': '([^']+)'/.exec(header)[1];
  const shape = Number(/'shape': \((\d+),\)/.exec(header)[1]);
  const body = buf.subarray(10 + headerLen);
  const ab = body.buffer.slice(body.byteOffset, body.byteOffset + body.length);
  let values;
  switch (descr) {
    case "<f4": values = typed ? new Float32Array(ab) : Array.from(new Float32Array(ab)); break;
    case "<f8": values = typed ? new Float64Array(ab) : Array.from(new Float64Array(ab)); break;
    case "<i4": values = Array.from(new Int32Array(ab)); break;
    case "<i8": values = Array.from(new BigInt64Array(ab), Number); break;
    case "<f2": values = Array.from(new Uint16Array(ab), half); break;
    case "<u2": values = Array.from(new Uint16Array(ab), bfloat16 ? bf16 : (v) => v); break;
    default: throw new Error(`${file}: unexpected dtype ${descr}`);
  }
  if (values.length !== shape) throw new Error(`${file}: shape ${shape} but ${values.length} values`);
  return { descr, header, values };
}
