// The engine's sampling rules (SamplingParams) as the sampler op reads them (ops/sampling: the
// device kernel and its CPU reference share the semantics documented there). A request's draws
// depend only on its seed, its logits and the position of the token drawn.
#pragma once
#include <cstdint>

#include "dsa/engine/sampling_params.h"
#include "dsa/ops/sampling/sampling_row.h"

namespace dsa::engine {

// Index of the largest value (lowest index on ties; NaN never wins). Throws when every value is NaN.
int32_t argmax_token(const float* logits, int64_t vocab);

// The sampler row of a request whose next token takes position `counter` of its sequence.
ops::SamplingRow sampling_row(const SamplingParams& p, uint64_t seed, uint64_t counter);

// The host reference: one token id from logits[0..vocab), -1 when the logits are not finite.
int32_t sample_token(const float* logits, int64_t vocab, const SamplingParams& p, uint64_t seed, uint64_t counter);

}  // namespace dsa::engine
