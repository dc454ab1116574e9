// Float conversions the references need where native code stores a narrower type than it computes in.

/** float32 to bfloat16, round to nearest even (finite values). */
export function toBfloat16(v) {
  const f = new Float32Array([v]);
  const u = new Uint32Array(f.buffer);
  u[0] = (u[0] + 0x7fff + ((u[0] >>> 16) & 1)) & 0xffff0000;
  return f[0];
}
