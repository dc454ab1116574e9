import type { NativeDType } from "../comm/native.js";
import { ELEMENT_BYTES } from "../config/job.js";
import { writeFileAtomic } from "./write-atomic.js";

// NumPy type strings; bfloat16 has none, so it is stored as its raw 16 bits ('<u2').
const DESCR: Record<NativeDType, string> = {
  float32: "<f4", float64: "<f8", int32: "<i4", int64: "<i8", float16: "<f2", bfloat16: "<u2",
};

/** A 1-D array as a .npy v1.0 file, readable with numpy.load. */
export function npyBytes(dtype: NativeDType, data: Uint8Array): Buffer {
  const dict = `{'descr': '${DESCR[dtype]}', 'fortran_order': False, 'shape': (${data.length / ELEMENT_BYTES[dtype]},), }`;
  // Magic (6) + version (2) + header length (2) + header, padded with spaces to a multiple of 64, ending "\n".
  const unpadded = 10 + dict.length + 1;
  const header = dict + " ".repeat((64 - (unpadded % 64)) % 64) + "\n";
  const prefix = Buffer.alloc(10);
  prefix.write("\x93NUMPY", 0, "latin1");
  prefix.writeUInt8(1, 6);
  prefix.writeUInt8(0, 7);
  prefix.writeUInt16LE(header.length, 8);
  return Buffer.concat([prefix, Buffer.from(header, "latin1"), data]);
}

export function writeNpy(file: string, dtype: NativeDType, data: Uint8Array): void {
  writeFileAtomic(file, npyBytes(dtype, data));
}
