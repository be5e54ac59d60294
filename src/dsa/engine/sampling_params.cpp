#include "dsa/engine/sampling_params.h"

#include <cmath>

#include "dsa/core/error.h"

namespace dsa::engine {

void SamplingParams::validate(int64_t vocab) const {
  DSA_CHECK(max_tokens >= 1, "max_tokens must be >= 1, got {}", max_tokens);
  DSA_CHECK(std::isfinite(temperature) && temperature >= 0, "temperature must be finite and >= 0, got {}", temperature);
  DSA_CHECK(top_k >= 0, "top_k must be >= 0 (0 = off), got {}", top_k);
  DSA_CHECK(std::isfinite(top_p) && top_p > 0 && top_p <= 1, "top_p must be in (0, 1], got {}", top_p);
  for (int32_t t : stop_token_ids)
    DSA_CHECK(t >= 0 && t < vocab, "stop_token_ids: {} is outside the vocabulary [0, {})", t, vocab);
}

}  // namespace dsa::engine
