#include "dsa/engine/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "dsa/core/error.h"
#include "dsa/ops/sampling/sampling.h"

namespace dsa::engine {

int32_t argmax_token(const float* logits, int64_t vocab) {
  DSA_CHECK(vocab > 0, "argmax_token: empty logits row");
  int64_t best = -1;
  for (int64_t i = 0; i < vocab; ++i) {
    if (std::isnan(logits[i])) continue;
    if (best < 0 || logits[i] > logits[best]) best = i;
  }
  DSA_CHECK(best >= 0, "sampler: every logit is NaN");
  return static_cast<int32_t>(best);
}

ops::SamplingRow sampling_row(const SamplingParams& p, uint64_t seed, uint64_t counter) {
  ops::SamplingRow r;
  r.temperature = static_cast<float>(p.temperature);
  r.top_k = static_cast<int32_t>(std::min<int64_t>(p.top_k, std::numeric_limits<int32_t>::max()));
  r.top_p = static_cast<float>(p.top_p);
  r.seed = seed;
  r.counter = counter;
  return r;
}

int32_t sample_token(const float* logits, int64_t vocab, const SamplingParams& p, uint64_t seed, uint64_t counter) {
  return ops::sample_row(logits, vocab, sampling_row(p, seed, counter));
}

}  // namespace dsa::engine
