#include "dsa/engine/sampler.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "dsa/core/error.h"

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

int32_t sample_token(const float* logits, int64_t vocab, const SamplingParams& p, std::mt19937_64& rng) {
  if (p.temperature == 0.0) return argmax_token(logits, vocab);
  // Candidates by descending logit (lowest id first on ties), cut to top_k.
  std::vector<int32_t> ids(static_cast<size_t>(vocab));
  std::iota(ids.begin(), ids.end(), 0);
  for (int64_t i = 0; i < vocab; ++i) DSA_CHECK(!std::isnan(logits[i]), "sampler: logit {} is NaN", i);
  auto better = [&](int32_t a, int32_t b) { return logits[a] > logits[b] || (logits[a] == logits[b] && a < b); };
  const int64_t k = (p.top_k > 0 && p.top_k < vocab) ? p.top_k : vocab;
  if (k < vocab || p.top_p < 1.0) {
    std::partial_sort(ids.begin(), ids.begin() + k, ids.end(), better);
    ids.resize(static_cast<size_t>(k));
  }
  // Softmax of logits / temperature in double over the candidates.
  double mx = -INFINITY;
  for (int32_t i : ids) mx = std::max(mx, static_cast<double>(logits[i]));
  std::vector<double> prob(ids.size());
  double sum = 0;
  for (size_t j = 0; j < ids.size(); ++j) {
    prob[j] = std::exp((static_cast<double>(logits[ids[j]]) - mx) / p.temperature);
    sum += prob[j];
  }
  // Nucleus: the shortest prefix (ids are sorted here whenever top_p < 1) reaching top_p.
  size_t n = ids.size();
  if (p.top_p < 1.0) {
    double cum = 0;
    for (size_t j = 0; j < ids.size(); ++j) {
      cum += prob[j] / sum;
      if (cum >= p.top_p) {
        n = j + 1;
        break;
      }
    }
  }
  double kept = 0;
  for (size_t j = 0; j < n; ++j) kept += prob[j];
  // Uniform in [0, 1) from the 53 high bits of one draw.
  const double u = static_cast<double>(rng() >> 11) * 0x1.0p-53 * kept;
  double cum = 0;
  for (size_t j = 0; j < n; ++j) {
    cum += prob[j];
    if (u < cum) return ids[j];
  }
  return ids[n - 1];  // u rounded up to `kept`
}

}  // namespace dsa::engine
