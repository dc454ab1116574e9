// SPMD_CPU_KERNEL marks a CPU kernel compiled twice, for baseline x86-64 and for AVX2, of which the loader
// picks the one the CPU runs (GCC's target_clones; flatten inlines everything the kernel calls, so the helpers
// get the AVX2 code too). The quantized and 1-bit kernels are bound by their arithmetic more than by memory,
// and AVX2 does it with twice the lanes per instruction; so are the seeded fills, which a check runs again for
// every element it compares (W times for a reduction's): a 64-bit hash an element, four at a time (a copy's
// check went from 4.5 to 2.0 ns an element on a Zen 5 core). The results are bit-identical: every operation is
// IEEE's correctly rounded one in both, sums keep their fixed lanes, and the build fuses no multiply-add
// (-ffp-contract=off). test/aarch64.test.js compares every kernel's bits with aarch64's.
#pragma once

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
#define SPMD_CPU_KERNEL [[gnu::target_clones("avx2", "default"), gnu::flatten]]
#else
#define SPMD_CPU_KERNEL
#endif
