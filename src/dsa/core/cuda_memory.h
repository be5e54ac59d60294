// Raw device memory and copies. Compiled against the CUDA runtime when dsa is built with CUDA;
// otherwise every call throws a dsa::Error saying that this build has no CUDA.
//
// Device memory is cached: free() keeps the block in a per-device free list keyed by its
// rounded size and alloc() reuses it, so the many temporaries of a forward step cost neither a
// cudaMalloc nor a device-synchronising cudaFree. Reuse is safe because every dsa kernel, copy
// and library call runs on the legacy default stream (in order): work enqueued after alloc()
// runs after the work that used the block before it was freed. Sizes are rounded up to 512 B
// below 1 MiB, to 1 MiB below 64 MiB and to 16 MiB above (bounded waste, good reuse). When
// cudaMalloc fails, the cache is released and the allocation retried once.
// DSA_CUDA_CACHE=0 turns caching off (every free is a cudaFree).
#pragma once
#include <cstddef>

namespace dsa::cuda_memory {

void* alloc(size_t nbytes, int device);
void free(void* p, int device) noexcept;
enum class Dir { H2D, D2H, D2D };
void copy(void* dst, const void* src, size_t nbytes, Dir dir);  // synchronous
void memset(void* p, int byte, size_t nbytes);                   // synchronous

struct CacheStats {
  size_t allocated_bytes = 0;  // in use by tensors (rounded sizes)
  size_t cached_bytes = 0;     // freed, kept for reuse
  size_t device_allocs = 0;    // cudaMalloc calls so far
  size_t reuses = 0;           // alloc() calls served from the cache
};
CacheStats cache_stats(int device);
// Returns every cached (free) block of `device` to CUDA (cudaFree; synchronises the device).
void release_cached(int device);
// The size a request of n bytes occupies (the rounding above); exposed for tests.
size_t rounded_size(size_t n);

}  // namespace dsa::cuda_memory
