// Raw device memory and copies. Compiled against the CUDA runtime when dsa is built with CUDA;
// otherwise every call throws a dsa::Error saying that this build has no CUDA.
//
// Device memory is cached: free() keeps the block in a per-device free list keyed by its
// rounded size and alloc() reuses it, so the many temporaries of a forward step cost neither a
// cudaMalloc nor a device-synchronising cudaFree. Reuse is safe because all of dsa's device work
// of a process runs in one order: on the current stream of the thread that drives the model
// (core/cuda_stream.h; created with cudaStreamCreate, so it is also ordered with the legacy
// default stream used before a runner exists): work enqueued after alloc() runs after the work
// that used the block before it was freed. Sizes are rounded up to 512 B
// below 1 MiB, to 1 MiB below 64 MiB and to 16 MiB above (bounded waste, good reuse). When
// cudaMalloc fails, the cache is released and the allocation retried once.
// DSA_CUDA_CACHE=0 turns caching off (every free is a cudaFree).
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

namespace dsa::cuda_memory {

void* alloc(size_t nbytes, int device);
void free(void* p, int device) noexcept;
enum class Dir { H2D, D2H, D2D };
// On this thread's current stream (core/cuda_stream.h). D2H and H2D wait for the copy (the host
// buffer may be pageable and reused at once) and are counted as host waits; D2D is only enqueued.
void copy(void* dst, const void* src, size_t nbytes, Dir dir);
// Enqueued on the current stream, no wait: `host` side must be pinned (alloc_pinned) and stay
// untouched until the stream has run the copy.
void copy_async(void* dst, const void* src, size_t nbytes, Dir dir);
void memset(void* p, int byte, size_t nbytes);  // enqueued on the current stream
// Page-locked host memory (cudaMallocHost): the host side of asynchronous copies.
void* alloc_pinned(size_t nbytes);
void free_pinned(void* p) noexcept;

struct CacheStats {
  size_t allocated_bytes = 0;  // in use by tensors (rounded sizes)
  size_t peak_allocated_bytes = 0;  // the most allocated_bytes ever was (reset_peak sets it to now)
  size_t cached_bytes = 0;     // freed, kept for reuse
  size_t device_allocs = 0;    // cudaMalloc calls so far
  size_t reuses = 0;           // alloc() calls served from the cache
};
CacheStats cache_stats(int device);
// Returns every cached (free) block of `device` to CUDA (cudaFree; synchronises the device).
void release_cached(int device);
// Sets the peak of allocated_bytes to its current value.
void reset_peak(int device);
// The size a request of n bytes occupies (the rounding above); exposed for tests.
size_t rounded_size(size_t n);

// A counter that changes whenever device memory that a captured graph may hold changes hands:
// every alloc() or free() not served by an arena (workspaces created or grown), every arena
// growth, and a step temporary that overflowed its arena and outlived the step. A captured CUDA
// graph holds raw addresses; it stays valid only while the epoch it was captured under is current
// (engine/step_graphs.h). Process-wide, so conservative. An arena's overflow (a step temporary
// that did not fit, taken from the caching allocator and freed within the step) does not change
// it: no graph holds such a block, because a capture during which its arena overflowed is
// dropped (StepArena::overflows()).
uint64_t memory_epoch();

}  // namespace dsa::cuda_memory

namespace dsa::cuda_memory {

// A step arena: while an ArenaScope is active on a thread, the CUDA allocations that thread makes
// on the arena's device come from one preallocated buffer by bumping an offset (256-byte
// aligned), and frees cost nothing. reset() between steps rewinds the offset, so a step that
// makes the same allocations gets the same addresses every time (what CUDA graph capture needs).
// A step whose temporaries exceed the capacity takes the rest from the caching allocator and the
// next reset() grows the arena to the high-water mark (one cudaFree + cudaMalloc between steps;
// logged at debug level with the sizes).
// reset() throws if a tensor allocated in the last step is still alive: such a tensor would be
// overwritten by the next step, so it must be allocated under a PersistentScope instead
// (workspaces that live across steps).
class StepArena {
 public:
  StepArena(int device, size_t capacity);
  ~StepArena();
  StepArena(const StepArena&) = delete;
  StepArena& operator=(const StepArena&) = delete;
  void reset();
  int device() const { return device_; }
  size_t capacity() const { return capacity_; }
  size_t used() const { return used_; }
  size_t high_water() const { return high_; }
  int64_t live() const { return live_; }
  // Allocations that did not fit since the arena was made (monotonic): a graph capture compares
  // it before and after, and drops a capture that took memory from outside the arena.
  uint64_t overflows() const { return overflows_; }
  // Internal (cuda_memory.cpp): nullptr when the arena is full; overflow blocks of this step.
  void* try_alloc(size_t nbytes);
  bool owns(const void* p) const;
  void release(const void* p);
  void note_overflow(void* p);
  bool forget_overflow(void* p);

 private:
  int device_;
  char* base_ = nullptr;
  size_t capacity_ = 0, used_ = 0, high_ = 0, overflow_ = 0;
  int64_t live_ = 0;
  uint64_t overflows_ = 0;
  std::vector<void*> overflow_live_;  // overflow blocks not yet freed (few: a step's overflow)
};

class ArenaScope {
 public:
  explicit ArenaScope(StepArena& arena);
  ~ArenaScope();
  ArenaScope(const ArenaScope&) = delete;
  ArenaScope& operator=(const ArenaScope&) = delete;

 private:
  StepArena* prev_;
};

// Suspends this thread's arena (allocations go to the caching allocator) for the scope.
class PersistentScope {
 public:
  PersistentScope();
  ~PersistentScope();
  PersistentScope(const PersistentScope&) = delete;
  PersistentScope& operator=(const PersistentScope&) = delete;

 private:
  StepArena* prev_;
};

}  // namespace dsa::cuda_memory
