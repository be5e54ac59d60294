// Device scratch that outlives a step (split-K partials, split-KV partials, their counters): one
// buffer per (purpose, device, stream).
//
// Why per stream: kernels on one stream run in order, so a buffer private to a stream is never
// used by two launches at once; two threads driving two models on two streams (tensor-parallel
// ranks on one GPU) must not share one. Why grow-only and never freed: a CUDA graph captured
// earlier holds the buffer's address, so an outgrown buffer is retired (kept), not handed back
// to the allocator, and growing it moves the memory epoch (cuda_memory.h) so that no graph
// captured against the old address is replayed. Allocated outside any step arena.
#pragma once
#include <cstddef>
#include <string_view>

namespace dsa::cuda_memory {

struct Scratch {
  void* ptr = nullptr;
  size_t bytes = 0;    // capacity: at least what was asked for
  bool fresh = false;  // allocated by this call (contents undefined: zero it if the kernels need it)
};

// At least `bytes` of device memory on `device` for work enqueued on `stream` (a cudaStream_t;
// nullptr is the legacy default stream). Growth at least doubles, from 1 MiB. Thread-safe.
Scratch stream_scratch(std::string_view purpose, int device, void* stream, size_t bytes);

}  // namespace dsa::cuda_memory
