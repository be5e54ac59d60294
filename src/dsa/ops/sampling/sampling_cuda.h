// Launcher of the CUDA sampler (sampling.cu). Only used when DSA_WITH_CUDA.
#pragma once
#include <cstddef>
#include <cstdint>

namespace dsa::ops::cuda {

constexpr int kSampleMaxSorted = 2048;  // top_p candidates sorted in shared memory

// Device scratch the launcher needs for N rows of V logits (the per-chunk partials).
size_t sample_scratch_bytes(int64_t N, int64_t V);
void sample_tokens(const float* logits, const uint8_t* rows, int32_t* out, int64_t N, int64_t V, void* scratch);

}  // namespace dsa::ops::cuda
