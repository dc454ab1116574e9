// Copies into memory that will not be read again soon (a collective's output, megabytes past the cache),
// with non-temporal stores: a normal store first reads each line it fills, so streaming saves a third of
// the memory traffic of a copy that misses the cache.
#pragma once
#include <cstddef>

namespace spmd::kernels {

// As memcpy (no overlap); the stores are ordered before the function returns.
void streamCopy(void* dst, const void* src, size_t n);

// streamCopy where `stream`, else memcpy; nothing when n is 0 or dst is src (empty blocks and in-place
// calls make null and identical pointers routine, and memcpy is undefined for both).
void copyOut(bool stream, void* dst, const void* src, size_t n);

}  // namespace spmd::kernels
