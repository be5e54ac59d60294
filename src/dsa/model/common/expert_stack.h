// The routed (and shared) experts of one MoE weight as the expert GEMM reads them: one
// ops::ExpertWeights [E][N][K...] whose expert e holds its parts' rows one after another (gate
// then up for w13; the one down projection for w2), weights and block scales alike. Both models
// stack through here: DeepSeek-V4 reads each part straight from the memory-mapped checkpoint (cut
// to a tensor-parallel rank's rows or columns first), GLM-5.1 from its host linears.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <utility>

#include "dsa/core/tensor.h"
#include "dsa/ops/moe/expert_gemm.h"

namespace dsa::model {

// Part i of expert e: its weight [N_i][K...] and scale (MXFP4: UE8M0 [N_i][K/32]; FP8 128x128:
// f32 [ceil(N_i/128)][ceil(K/128)]; BF16: undefined), on any device. Called once per part.
using ExpertPart = std::function<std::pair<Tensor, Tensor>(int64_t e, int i)>;

// Copies `experts` x `parts` parts into one stack on `dev`. Every expert's part i must have the
// dtype and shapes of expert 0's part i; with FP8 block scales every part but the last must fill
// whole 128-row blocks (the parts share one scale grid). Errors name `what`, the expert and part.
ops::ExpertWeights stack_expert_parts(int64_t experts, int parts, ops::WeightFormat fmt, const ExpertPart& part,
                                      Device dev, const std::string& what);

}  // namespace dsa::model
