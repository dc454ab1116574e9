#include "kernels/cpu/reduce.h"

#include <string>
#include <type_traits>

#include "base/error.h"

namespace spmd::kernels {
namespace {

// Integer sums must wrap the way the wire format's two's complement does; signed overflow is UB, so the
// addition happens in the unsigned type of the same width.
template <class T>
T add(T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(a) + static_cast<U>(b));
  } else {
    return a + b;
  }
}

struct Sum {
  template <class T> static T apply(T a, T b) { return add(a, b); }
};
// Written as a select on one comparison: that is the shape GCC turns into maxps/minps without -ffast-math.
struct Max {
  template <class T> static T apply(T a, T b) { return a < b ? b : a; }
};
struct Min {
  template <class T> static T apply(T a, T b) { return b < a ? b : a; }
};
// reduce3 with dst aliasing b becomes an in-place loop; swapping the operands keeps op(a, b)'s order, which
// matters for NaN propagation in Max/Min.
template <class Op>
struct Swapped {
  template <class T> static T apply(T a, T b) { return Op::apply(b, a); }
};

template <class T, class Op>
void fold(T* __restrict dst, const T* __restrict src, size_t n) {
  for (size_t i = 0; i < n; ++i) dst[i] = Op::apply(dst[i], src[i]);
}

template <class T, class Op>
void combine(T* __restrict dst, const T* __restrict a, const T* __restrict b, size_t n) {
  for (size_t i = 0; i < n; ++i) dst[i] = Op::apply(a[i], b[i]);
}

template <class T>
struct Type {
  using type = T;
};

// Turns the run-time (dtype, op) pair into compile-time types, so each loop above is written once and
// instantiated per combination.
template <class F>
void dispatch(DType dt, RedOp op, F&& f) {
  auto withOp = [&](auto type) {
    switch (op) {
      case RedOp::Sum: return f(type, Sum{});
      case RedOp::Max: return f(type, Max{});
      case RedOp::Min: return f(type, Min{});
    }
    throw CommError(code::kInvalid, "reduce: unknown reduction operator " + std::to_string(int(op)));
  };
  switch (dt) {
    case DType::F32: return withOp(Type<float>{});
    case DType::F64: return withOp(Type<double>{});
    case DType::I32: return withOp(Type<int32_t>{});
    case DType::I64: return withOp(Type<int64_t>{});
    case DType::F16:
    case DType::BF16:
      throw CommError(code::kInvalid, std::string("reduce: ") + std::string(dtypeName(dt)) +
                                          " is reduced in float32 by the communicator, not here");
  }
  throw CommError(code::kInvalid, "reduce: unknown dtype " + std::to_string(int(dt)));
}

}  // namespace

// An AVX2 clone where the CPU has it, picked at load time (GCC's target_clones): the loops then move 32
// bytes per instruction instead of the x86-64 baseline's 16, which the shm backend's reductions out of
// cache-resident slots notice. flatten inlines the loops, so the clone holds their AVX2 code.
#if defined(__x86_64__)
#define SPMD_REDUCE_KERNEL [[gnu::target_clones("avx2", "default"), gnu::flatten]]
#else
#define SPMD_REDUCE_KERNEL
#endif

SPMD_REDUCE_KERNEL
void reduceInto(DType dt, RedOp op, void* dst, const void* src, size_t count) {
  dispatch(dt, op, [&](auto type, auto o) {
    using T = typename decltype(type)::type;
    fold<T, decltype(o)>(static_cast<T*>(dst), static_cast<const T*>(src), count);
  });
}

SPMD_REDUCE_KERNEL
void reduce3(DType dt, RedOp op, void* dst, const void* a, const void* b, size_t count) {
  dispatch(dt, op, [&](auto type, auto o) {
    using T = typename decltype(type)::type;
    using Op = decltype(o);
    // The three-pointer loop promises no aliasing, so the allowed aliases take the two-pointer form.
    if (dst == a) {
      fold<T, Op>(static_cast<T*>(dst), static_cast<const T*>(b), count);
    } else if (dst == b) {
      fold<T, Swapped<Op>>(static_cast<T*>(dst), static_cast<const T*>(a), count);
    } else {
      combine<T, Op>(static_cast<T*>(dst), static_cast<const T*>(a), static_cast<const T*>(b), count);
    }
  });
}

}  // namespace spmd::kernels
