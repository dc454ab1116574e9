// Kernels of the 1-bit compressed allreduce (estimating/compressed_allreduce.h), for T = float or double.
//
// Sign convention (DESIGN.md): sign(v) = +1 for v >= 0 (so 0 and -0 map to +1), else -1. A set bit means
// +1. Element 8k+j lives in bit 7-j of byte k (most significant bit first, as numpy.packbits).
//
// Every kernel is one pass over memory. Sums of squares accumulate in double whatever T is: a float's
// square is exact in double, so the result depends on the order of the sum only at the 1e-16 level.
#pragma once
#include <cstddef>
#include <cstdint>

namespace spmd::kernels {

// x[i] += y[i]; returns the sum of the new x[i]^2.
template <class T>
double addAndSumSquares(T* x, const T* y, size_t n);

// Returns the sum of x[i]^2.
template <class T>
double sumSquares(const T* x, size_t n);

// packed[k] <- the signs of x[8k..8k+7]; then x[i] <- x[i] - scale*sign(x[i]) (the compression error).
// n must be a multiple of 8.
template <class T>
void packSignsKeepError(T* x, size_t n, T scale, uint8_t* packed);

// out[i] = scale*sign_i for the n elements packed in `packed` (n need not be a multiple of 8).
template <class T>
void unpackScaled(const uint8_t* packed, size_t n, T scale, T* out);

// acc[i] += sum over c < count of scales[c]*sign_i(packed[c]), adding the sources in order c = 0, 1, ...
// for each element; returns the sum of the new acc[i]^2. Works through acc in cache-sized tiles, so acc
// travels to and from memory once however many sources there are.
template <class T>
double accumulateSigns(const uint8_t* const* packed, const T* scales, int count, T* acc, size_t n);

// --- Carried error: the pipelined 1-bit allreduce (estimating/compressed_allreduce.h) on host memory ---
// The step above packs x, then rewrites x as its error x - s·sign(x) in a second pass, once the scale s
// (which needs every element) is known. These kernels keep the packed x itself and its scale instead, and
// take the error only when the next step reads x: e = x - s·sign(x) is the same operation on the same
// values, so every bit agrees with the kernels above, and a step makes one pass over x rather than two.
// Each works on one piece of a message at a time, in order, carrying its sums of squares to the next.

// The partial sums of addAndSumSquares(x, y, n) (over x[0, n)) and then of sumSquares(x + n, len - n) (the
// padding), in the lanes and order those functions add them, whatever pieces the elements come in.
struct CarriedSquares {
  static constexpr int kLanes = 8;
  double head[kLanes] = {}, pad[kLanes] = {};
  // The sum addAndSumSquares(x, y, n, len) (cpu_kernels.h) returns for the same elements.
  double total() const;
};

// x[from, to) of a message of len elements whose first n have an addend (from and to multiples of 8):
// x[i] <- (x[i] - s·sign(x[i])) + y[i] (no addend from n on), the new x[i]^2 into `squares`, and
// packed[k] <- the signs of the new x[from + 8k, from + 8k + 8).
template <class T>
void carryAddPack(T* x, const T* y, size_t from, size_t to, size_t n, size_t len, T s, uint8_t* packed,
                  CarriedSquares& squares);

// acc[from, to) of n elements (from a multiple of 2048, to one of 8): acc[i] <- (acc[i] - s·sign(acc[i])) plus
// weights[c]·sign_i(packed[c]) for c = 0, 1, ... in order, where packed[c] holds the signs of [from, to);
// out <- the signs of the new acc[from, to); adds the new acc[i]^2 to `squares` in accumulateSigns' order.
template <class T>
void carryAccumulatePack(T* acc, size_t from, size_t to, T s, const uint8_t* const* packed, const T* weights,
                         int count, uint8_t* out, double& squares);

// x - s·sign(x), elementwise: the error a carried buffer stands for.
template <class T>
void carriedError(const T* x, size_t n, T s, T* error);

}  // namespace spmd::kernels
