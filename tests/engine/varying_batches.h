// A runner-level schedule whose decode batch size changes every step (tests of decode padding,
// model_runner.h set_decode_padding, and of CUDA graphs over batch buckets): seven requests
// prefilled in one mixed step, then decode steps of 3, 5, 1, 7, 2, 6, 4, ... requests (rotating
// membership, so requests sit at different positions), crossing the tiny V4 compressor
// boundaries (ratios 4 and 128) and the sliding window for request 0. Every row returns its
// logits; request 1 samples (temperature, top-k, seeded), the others are greedy.
#pragma once
#include <cstdint>
#include <vector>

#include "dsa/engine/model_runner.h"
#include "dsa/model/causal_lm.h"

namespace dsa::engine::test {

struct VaryingRun {
  std::vector<std::vector<int32_t>> tokens;  // per step, per real row
  std::vector<std::vector<float>> logits;    // per step: the real rows' logits, row-major
  int64_t decode_shapes = 0;                 // distinct step shapes over the decode steps
  int64_t padded_steps = 0;
  StepGraphStats graphs;
};

// graphs: the runner's CUDA graphs on (CUDA only); pad_max: set_decode_padding (0 = off).
// want_logits false: no row returns logits (`logits` stays empty).
VaryingRun run_varying_batches(model::CausalLM& lm, bool graphs, int64_t pad_max, int decode_steps,
                               const std::vector<int>& sizes = {3, 5, 1, 7, 2, 6, 4}, bool want_logits = true);

}  // namespace dsa::engine::test
