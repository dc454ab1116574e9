// Kernels of the quantized allreduce (estimating/quantized_allreduce.h): symmetric per-group quantization to int8
// or int4 in float32 (DESIGN.md, quantized_allreduce step 1, after DeepSpeed's quantizer).
//
// A block of n values quantized in groups of g (the last group short when g does not divide n) is stored as
//   ceil(n/g) steps, float32 little-endian, at any byte alignment (records on the wire are packed), then
//   the codes: one two's-complement byte per value (int8), or one nibble per value, value 2k in the high
//   nibble of byte k and 2k+1 in the low one (int4; n and g even, so a group's codes start on a byte).
// Per group: step = absmax / 2^(b-1), or 1 where absmax = 0; q = clamp(round-half-even(x / step),
// -2^(b-1), 2^(b-1) - 1); the value it stands for is x̂ = q·step.
//
// Every result is what IEEE float32 arithmetic gives one operation at a time (a division, not a multiply by
// the reciprocal; no fused multiply-add, which the build turns off), so a reference that rounds each
// operation to float32 reproduces it bit for bit.
#pragma once
#include <cstddef>
#include <cstdint>

#include "kernels/quant_format.h"

namespace spmd::kernels {

// Quantizes x[0..n) into out (f.bytes(n) bytes). With `error` (n floats, or null for none) the values
// quantized are x + beta·error, and error becomes what quantizing them lost (error feedback). Returns false
// when a value quantized is not finite; out is then meaningless.
bool quantize(QuantFormat f, const float* x, float* error, float beta, size_t n, uint8_t* out);

// out[i] = x̂_i, the n values stored in `in`.
void dequantize(QuantFormat f, const uint8_t* in, size_t n, float* out);

// out[i] = x̂_i(in[0]) + x̂_i(in[1]) + ..., added in source order and rounded after each addition.
void dequantizeSum(QuantFormat f, const uint8_t* const* in, int count, size_t n, float* out);

// dequantizeSum then quantize, fused: the sum of each group stays in `scratch` (min(n, f.groupSize)
// floats), which for groups of a few thousand values never leaves the L1 cache. Error feedback and the
// result as for quantize.
bool dequantizeSumQuantize(QuantFormat f, const uint8_t* const* in, int count, float* error, float beta, size_t n,
                           float* scratch, uint8_t* out);

}  // namespace spmd::kernels
