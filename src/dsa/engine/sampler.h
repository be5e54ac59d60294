// Token sampler of the engine (SamplingParams in sampling_params.h gives the rules). Works on one
// f32 logits row on the host; the RNG is the request's own (std::mt19937_64, whose output
// sequence the C++ standard fixes, and uniforms made from its 53 high bits here rather than by
// std::uniform_real_distribution, whose algorithm is implementation-defined), so a seed gives the
// same tokens on every platform for the same logits.
#pragma once
#include <cstdint>
#include <random>

#include "dsa/engine/sampling_params.h"

namespace dsa::engine {

// Index of the first NaN or Inf in logits[0..vocab), or -1 when all are finite. A non-finite
// logit means broken weights or arithmetic: the engine fails that request with an error.
int64_t first_non_finite(const float* logits, int64_t vocab);

// Index of the largest value (lowest index on ties; NaN never wins).
int32_t argmax_token(const float* logits, int64_t vocab);

// Samples one token id from logits[0..vocab) by `p`; greedy (no RNG draw) when p.temperature == 0.
int32_t sample_token(const float* logits, int64_t vocab, const SamplingParams& p, std::mt19937_64& rng);

}  // namespace dsa::engine
