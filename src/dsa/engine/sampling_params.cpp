#include "dsa/engine/sampling_params.h"

#include <cmath>

#include "dsa/core/error.h"

namespace dsa::engine {

void SamplingParams::validate(int64_t vocab) const {
  DSA_CHECK(max_tokens >= 1, "max_tokens must be >= 1, got {}", max_tokens);
  DSA_CHECK(std::isfinite(temperature) && temperature >= 0, "temperature must be finite and >= 0, got {}", temperature);
  DSA_CHECK(top_k >= 0, "top_k must be >= 0 (0 = off), got {}", top_k);
  DSA_CHECK(std::isfinite(top_p) && top_p > 0 && top_p <= 1, "top_p must be in (0, 1], got {}", top_p);
  DSA_CHECK(std::isfinite(min_p) && min_p >= 0 && min_p <= 1, "min_p must be in [0, 1], got {}", min_p);
  DSA_CHECK(std::isfinite(presence_penalty) && presence_penalty >= -2 && presence_penalty <= 2,
            "presence_penalty must be in [-2, 2], got {}", presence_penalty);
  DSA_CHECK(std::isfinite(frequency_penalty) && frequency_penalty >= -2 && frequency_penalty <= 2,
            "frequency_penalty must be in [-2, 2], got {}", frequency_penalty);
  DSA_CHECK(std::isfinite(repetition_penalty) && repetition_penalty > 0,
            "repetition_penalty must be finite and > 0, got {}", repetition_penalty);
  for (const auto& [id, bias] : logit_bias) {
    DSA_CHECK(id >= 0 && id < vocab, "logit_bias: token {} is outside the vocabulary [0, {})", id, vocab);
    DSA_CHECK(std::isfinite(bias) && bias >= -100 && bias <= 100, "logit_bias: the bias of token {} must be in "
              "[-100, 100], got {}", id, bias);
  }
  DSA_CHECK(min_tokens >= 0 && min_tokens <= max_tokens, "min_tokens must be in [0, max_tokens = {}], got {}",
            max_tokens, min_tokens);
  for (int32_t t : stop_token_ids)
    DSA_CHECK(t >= 0 && t < vocab, "stop_token_ids: {} is outside the vocabulary [0, {})", t, vocab);
  DSA_CHECK(logprobs >= -1 && logprobs <= kMaxLogprobs, "logprobs must be in [0, {}], got {}", kMaxLogprobs, logprobs);
  DSA_CHECK(prompt_logprobs >= -1 && prompt_logprobs <= kMaxLogprobs, "prompt_logprobs must be in [0, {}], got {}",
            kMaxLogprobs, prompt_logprobs);
  DSA_CHECK(speculative_tokens >= -1 && speculative_tokens <= 64,
            "speculative_tokens must be -1 (the engine's) or in [0, 64], got {}", speculative_tokens);
}

bool SamplingParams::processes_logits() const {
  return !logit_bias.empty() || min_tokens > 0 || repetition_penalty != 1.0 || frequency_penalty != 0.0 ||
         presence_penalty != 0.0;
}

}  // namespace dsa::engine
