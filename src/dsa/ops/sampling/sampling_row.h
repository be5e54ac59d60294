// One row's sampling rules as the sampler reads them (sampling.h has the semantics). A plain
// 32-byte struct: the engine packs one per row into its step upload, and the CUDA kernel reads it.
#pragma once
#include <cstdint>

namespace dsa::ops {

struct SamplingRow {
  float temperature = 0.f;  // 0: greedy
  int32_t top_k = 0;        // 0: all
  float top_p = 1.f;        // (0, 1]; 1: no nucleus cut
  float min_p = 0.f;        // [0, 1]; 0: off (the CUDA kernel leaves min_p rows to the host: -2)
  uint64_t seed = 0;
  uint64_t counter = 0;     // the position the sampled token takes in its sequence
};
static_assert(sizeof(SamplingRow) == 32, "SamplingRow is uploaded as raw bytes");

}  // namespace dsa::ops
