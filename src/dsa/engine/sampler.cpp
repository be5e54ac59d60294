#include "dsa/engine/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "dsa/core/error.h"
#include "dsa/ops/sampling/sampling.h"

namespace dsa::engine {

int64_t first_non_finite(const float* logits, int64_t vocab) {
  for (int64_t i = 0; i < vocab; ++i)
    if (!std::isfinite(logits[i])) return i;
  return -1;
}

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
  r.min_p = static_cast<float>(p.min_p);
  r.seed = seed;
  r.counter = counter;
  return r;
}

int32_t sample_token(const float* logits, int64_t vocab, const SamplingParams& p, uint64_t seed, uint64_t counter) {
  return ops::sample_row(logits, vocab, sampling_row(p, seed, counter));
}

void process_logits(float* logits, int64_t vocab, const SamplingParams& p, std::span<const int32_t> prompt,
                    std::span<const int32_t> output, std::span<const int32_t> stop_ids) {
  auto at = [&](int32_t id) -> float& {
    DSA_CHECK(id >= 0 && id < vocab, "sampler: token {} is outside the vocabulary [0, {})", id, vocab);
    return logits[id];
  };
  for (const auto& [id, bias] : p.logit_bias) at(id) += bias;
  if (static_cast<int64_t>(output.size()) < p.min_tokens)
    for (int32_t id : stop_ids) at(id) = -std::numeric_limits<float>::infinity();
  if (p.repetition_penalty != 1.0) {
    std::vector<int32_t> seen(prompt.begin(), prompt.end());
    seen.insert(seen.end(), output.begin(), output.end());
    std::sort(seen.begin(), seen.end());
    seen.erase(std::unique(seen.begin(), seen.end()), seen.end());
    const float r = static_cast<float>(p.repetition_penalty);
    for (int32_t id : seen) {
      float& x = at(id);
      x = x > 0 ? x / r : x * r;
    }
  }
  if (p.frequency_penalty != 0.0 || p.presence_penalty != 0.0) {
    std::vector<int32_t> out(output.begin(), output.end());
    std::sort(out.begin(), out.end());
    for (size_t i = 0; i < out.size();) {
      size_t j = i;
      while (j < out.size() && out[j] == out[i]) ++j;
      at(out[i]) -= static_cast<float>(p.frequency_penalty * static_cast<double>(j - i) + p.presence_penalty);
      i = j;
    }
  }
}

TokenLogprob token_logprob(const float* logits, int64_t vocab, int32_t token, int top) {
  DSA_CHECK(vocab > 0 && token >= 0 && token < vocab, "token_logprob: token {} outside [0, {})", token, vocab);
  double mx = -INFINITY;
  for (int64_t i = 0; i < vocab; ++i) {
    DSA_CHECK(!std::isnan(logits[i]), "sampler: logit {} is NaN", i);
    mx = std::max(mx, static_cast<double>(logits[i]));
  }
  double sum = 0;
  for (int64_t i = 0; i < vocab; ++i) sum += std::exp(static_cast<double>(logits[i]) - mx);
  const double lse = mx + std::log(sum);
  TokenLogprob r;
  r.token = token;
  r.logprob = static_cast<float>(static_cast<double>(logits[token]) - lse);
  const int64_t k = std::clamp<int64_t>(top, 0, vocab);
  if (k > 0) {
    std::vector<int32_t> ids(static_cast<size_t>(vocab));
    std::iota(ids.begin(), ids.end(), 0);
    std::partial_sort(ids.begin(), ids.begin() + k, ids.end(), [&](int32_t a, int32_t b) {
      return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
    });
    for (int64_t j = 0; j < k; ++j)
      r.top.emplace_back(ids[j], static_cast<float>(static_cast<double>(logits[ids[j]]) - lse));
  }
  return r;
}

}  // namespace dsa::engine
