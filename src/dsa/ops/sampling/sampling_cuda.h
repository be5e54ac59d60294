// Launcher of the CUDA sampler (sampling.cu). Only used when DSA_WITH_CUDA.
#pragma once
#include <cstdint>

namespace dsa::ops::cuda {

constexpr int kSampleMaxSorted = 2048;  // top_p candidates sorted in shared memory

void sample_tokens(const float* logits, const uint8_t* rows, int32_t* out, int64_t N, int64_t V);

}  // namespace dsa::ops::cuda
