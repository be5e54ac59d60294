// Token sampler of the engine (SamplingParams in sampling_params.h gives the rules and their
// order). Pure host functions over one f32 logits row. The RNG is the request's own
// (std::mt19937_64, whose output sequence the C++ standard fixes, and uniforms made from its 53
// high bits here rather than by std::uniform_real_distribution, whose algorithm is
// implementation-defined), so a seed gives the same tokens on every platform for the same logits.
#pragma once
#include <cstdint>
#include <random>
#include <span>
#include <utility>
#include <vector>

#include "dsa/engine/sampling_params.h"

namespace dsa::engine {

// Index of the largest value (lowest index on ties; NaN never wins).
int32_t argmax_token(const float* logits, int64_t vocab);

// Samples one token id from logits[0..vocab) by `p` (step 5 of sampling_params.h: temperature,
// top_k, min_p, top_p); greedy (no RNG draw) when p.temperature == 0.
int32_t sample_token(const float* logits, int64_t vocab, const SamplingParams& p, std::mt19937_64& rng);

// Steps 1-4 of sampling_params.h in place: logit_bias, min_tokens masking of `stop_ids` (the
// request's stop ids plus the eos ids that apply to it), repetition penalty over prompt and
// output, frequency and presence penalties over the output.
void process_logits(float* logits, int64_t vocab, const SamplingParams& p, std::span<const int32_t> prompt,
                    std::span<const int32_t> output, std::span<const int32_t> stop_ids);

// log-softmax of a row at one token, with the `top` largest (id, logprob) pairs, highest first
// (lowest id on ties). Computed in double; NaN logits throw.
struct TokenLogprob {
  int32_t token = 0;
  float logprob = 0;
  std::vector<std::pair<int32_t, float>> top;
};
TokenLogprob token_logprob(const float* logits, int64_t vocab, int32_t token, int top);

}  // namespace dsa::engine
