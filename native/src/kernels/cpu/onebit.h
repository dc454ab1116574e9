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

// A sum of squares in addAndSumSquares' order: kLanes partial sums, element i of each group of kLanes in
// lane i, a short last group in lane 0; carried from one piece of an array to the next.
struct SquareSums {
  static constexpr int kLanes = 8;
  double lanes[kLanes] = {};
  double total() const {
    double s = 0;
    for (double v : lanes) s += v;
    return s;
  }
};

// The two passes of the worker's side of a step in one, its error settled a step late (the host's form of
// estimating/compressed_allreduce.h): x[i] <- x[i] - carried*sign(x[i]) (what packSignsKeepError would have
// left), then x[i] += y[i] for i < n <= len; packed <- the signs of the new x[0..len); sums gains the new x[i]^2
// for i < n. Calls on consecutive pieces of an array, each a multiple of kLanes long but the one where n ends,
// sum as addAndSumSquares over the whole; with sumSquares over [n, len) after it, the order of the two-pass
// form, so the scale is the same to the bit. len must be a multiple of 8; carried = 0 settles nothing.
template <class T>
void settleAddPackSigns(T* x, const T* y, size_t n, size_t len, T carried, uint8_t* packed, SquareSums& sums);

// out[i] = scale*sign_i for the n elements packed in `packed` (n need not be a multiple of 8).
template <class T>
void unpackScaled(const uint8_t* packed, size_t n, T scale, T* out);

// unpackScaled for an output not read again soon, the same values: on x86-64 (where out is 16-byte aligned)
// with non-temporal stores, which write whole lines without reading them first (half the memory traffic of
// plain stores) and leave the cache to what is read next.
template <class T>
void unpackScaledStreaming(const uint8_t* packed, size_t n, T scale, T* out);

// acc[i] <- acc[i] - carried*sign(acc[i]) (as settleAddPackSigns; carried = 0 settles nothing), then acc[i] +=
// sum over c < count of scales[c]*sign_i(packed[c]), adding the sources in order c = 0, 1, ... for each
// element; signs (unless null; n a multiple of 8) <- the signs of the new acc; returns `squares` plus the sum
// of the new acc[i]^2. Works through acc in cache-sized
// tiles, so acc travels to and from memory once however many sources there are, and adds each tile's sum
// to the running one in turn: calls on consecutive pieces of acc, each a multiple of kSignsTile long but
// the last, that pass on what the one before returned, give what one call over the whole would.
constexpr size_t kSignsTile = 2048;
template <class T>
double accumulateSigns(const uint8_t* const* packed, const T* scales, int count, T* acc, size_t n, double squares,
                       T carried = 0, uint8_t* signs = nullptr);

}  // namespace spmd::kernels
