// The engine's sampling rules (SamplingParams, sampling_params.h) as the sampler op reads them
// (ops/sampling: the device kernel and its CPU reference share the semantics documented there),
// and the host steps a request may need beyond them: logits processing (logit_bias, min_tokens,
// penalties) and log-probabilities. A request's draws depend only on its seed, its logits and the
// position of the token drawn.
#pragma once
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "dsa/engine/sampling_params.h"
#include "dsa/ops/sampling/sampling_row.h"

namespace dsa::engine {

// Index of the first NaN or Inf in logits[0..vocab), or -1 when all are finite. A non-finite
// logit means broken weights or arithmetic: the engine fails that request with an error.
int64_t first_non_finite(const float* logits, int64_t vocab);

// Index of the largest value (lowest index on ties; NaN never wins). Throws when every value is NaN.
int32_t argmax_token(const float* logits, int64_t vocab);

// The sampler row of a request whose next token takes position `counter` of its sequence.
ops::SamplingRow sampling_row(const SamplingParams& p, uint64_t seed, uint64_t counter);

// The host reference of step 5 (temperature, top_k, min_p, top_p): one token id from
// logits[0..vocab), -1 when the logits are not finite.
int32_t sample_token(const float* logits, int64_t vocab, const SamplingParams& p, uint64_t seed, uint64_t counter);

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
