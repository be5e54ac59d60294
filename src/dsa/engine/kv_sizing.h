// How much memory the engine gives the KV caches, decided once at start-up after the weights are
// loaded (the same sizing for both models, `dsa serve`, `dsa generate` and `dsa bench`):
//   kv_cache_bytes > 0            exactly that many bytes (CPU and CUDA);
//   CUDA, otherwise               gpu_memory_utilization * total device memory, minus what is in
//                                 use now (weights, the tuner's leftovers, other processes) and
//                                 a reserve for the step's activations (step arena) and workspaces;
//   CPU, otherwise                a fixed default (kDefaultCpuKvBytes).
// The KV manager then splits the budget into the windowed groups and state slots (fixed by
// max_running and max_step_tokens) and the pages of the unbounded groups.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include "dsa/core/tensor.h"

namespace dsa::engine {

inline constexpr size_t kDefaultCpuKvBytes = size_t{1} << 30;

struct KvMemoryOptions {
  double gpu_memory_utilization = 0.9;  // fraction of the device's memory dsa may hold in all
  size_t kv_cache_bytes = 0;            // > 0: the KV budget itself
  size_t activation_reserve = 0;        // CUDA: bytes kept free for activations (0: from the step shape)

  void validate() const;  // throws dsa::Error naming the option
};

struct KvBudget {
  size_t bytes = 0;
  std::string how;  // one line for the start-up log
};

// `max_step_tokens` and `hidden` size the default activation reserve. Tensor parallelism: the
// budget is one rank's; `sharing` ranks on the same CUDA device split what is left after one
// activation reserve each (--kv-cache-memory and the CPU default are per rank as they are).
KvBudget kv_budget(Device dev, const KvMemoryOptions& o, int64_t max_step_tokens, int64_t hidden, int64_t vocab,
                   int sharing = 1);

}  // namespace dsa::engine
