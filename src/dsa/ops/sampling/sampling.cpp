// sample_tokens (sampling.h): checks, the CPU reference and the CUDA dispatch.
#include "dsa/ops/sampling/sampling.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <vector>

#include "dsa/core/error.h"
#include "dsa/ops/sampling/philox.h"
#ifdef DSA_WITH_CUDA
#include "dsa/core/cuda_launch.h"
#include "dsa/ops/sampling/sampling_cuda.h"
#endif

namespace dsa::ops {

float sampling_gumbel(uint64_t seed, uint64_t counter, int64_t id) {
  const float u = philox_uniform(seed, counter, static_cast<uint64_t>(id));
  return -logf(-logf(u));
}

namespace {

// Index of the largest finite logit (lowest on ties); -1 when the row holds NaN or +inf, or only -inf.
int64_t valid_best(const float* l, int64_t V) {
  int64_t best = -1;
  for (int64_t i = 0; i < V; ++i) {
    if (std::isnan(l[i]) || l[i] == INFINITY) return -1;
    if (l[i] > -INFINITY && (best < 0 || l[i] > l[best])) best = i;
  }
  return best;
}

// The candidates of a valid temperature > 0 row (sampling.h): ids[0..n), by descending logit
// (lower id first on ties) when a cut applies, else every id in order.
std::vector<int32_t> candidates(const float* l, int64_t V, const SamplingRow& r) {
  std::vector<int32_t> ids(static_cast<size_t>(V));
  std::iota(ids.begin(), ids.end(), 0);
  auto better = [&](int32_t a, int32_t b) { return l[a] > l[b] || (l[a] == l[b] && a < b); };
  const int64_t k = (r.top_k > 0 && r.top_k < V) ? r.top_k : V;
  size_t n = static_cast<size_t>(k);
  if (k < V || r.top_p < 1.f || r.min_p > 0.f) {
    std::partial_sort(ids.begin(), ids.begin() + k, ids.end(), better);
    ids.resize(static_cast<size_t>(k));
    if (r.min_p > 0.f) {  // p / p_max >= min_p  <=>  (l - l_max) / T >= log(min_p)
      const double cut = std::log(static_cast<double>(r.min_p));
      size_t m = 1;
      while (m < ids.size() && (static_cast<double>(l[ids[m]]) - l[ids[0]]) / r.temperature >= cut) ++m;
      ids.resize(m);
      n = m;
    }
    if (r.top_p < 1.f) {
      const double mx = l[ids[0]];
      std::vector<double> p(ids.size());
      double z = 0;
      for (size_t j = 0; j < ids.size(); ++j) z += p[j] = std::exp((static_cast<double>(l[ids[j]]) - mx) / r.temperature);
      double cum = 0;
      for (size_t j = 0; j < ids.size(); ++j) {
        cum += p[j];
        if (cum / z >= r.top_p) {
          n = j + 1;
          break;
        }
      }
    }
  }
  ids.resize(n);
  return ids;
}

}  // namespace

int32_t sample_row(const float* l, int64_t V, const SamplingRow& r) {
  const int64_t best = valid_best(l, V);
  if (best < 0) return -1;
  if (r.temperature == 0.f) return static_cast<int32_t>(best);
  int64_t pick = -1;
  float pick_key = -INFINITY;
  for (const int32_t id : candidates(l, V, r)) {
    const float key = l[id] / r.temperature + sampling_gumbel(r.seed, r.counter, id);
    if (pick < 0 || key > pick_key || (key == pick_key && id < pick)) {
      pick = id;
      pick_key = key;
    }
  }
  return static_cast<int32_t>(pick);
}

bool sampling_probs(const float* l, int64_t V, const SamplingRow& r, float* probs) {
  const int64_t best = valid_best(l, V);
  if (best < 0) return false;
  std::fill(probs, probs + V, 0.f);
  if (r.temperature == 0.f) {
    probs[best] = 1.f;
    return true;
  }
  const std::vector<int32_t> ids = candidates(l, V, r);
  const double mx = l[best], T = r.temperature;
  double z = 0;
  for (const int32_t id : ids) z += std::exp((static_cast<double>(l[id]) - mx) / T);
  for (const int32_t id : ids) probs[id] = static_cast<float>(std::exp((static_cast<double>(l[id]) - mx) / T) / z);
  return true;
}

void sample_tokens(const Tensor& logits, const Tensor& rows, const Tensor& out) {
  DSA_CHECK(logits.defined() && logits.dtype() == DType::F32 && logits.dim() == 2 && logits.is_contiguous(),
            "sample_tokens: logits must be contiguous f32 [N][V], got {}", logits.defined() ? logits.str() : "undefined");
  const int64_t N = logits.size(0), V = logits.size(1);
  const Device dev = logits.device();
  DSA_CHECK(V >= 1, "sample_tokens: empty vocabulary");
  DSA_CHECK(rows.defined() && rows.dtype() == DType::U8 && rows.is_contiguous() &&
                rows.nbytes() == static_cast<size_t>(N) * sizeof(SamplingRow) && rows.device() == dev,
            "sample_tokens: rows must be {} bytes of SamplingRow on {}, got {}", N * sizeof(SamplingRow), dev.str(),
            rows.defined() ? rows.str() : "undefined");
  out.check("sample_tokens: out", DType::I32, {N});
  DSA_CHECK(out.device() == dev && out.is_contiguous(), "sample_tokens: out must be contiguous on {}", dev.str());
  if (N == 0) return;
  if (dev.is_cuda()) {
#ifdef DSA_WITH_CUDA
    DSA_CHECK(V <= 0x7fffffffLL, "sample_tokens: vocabulary of {} ids exceeds the kernel's i32 ids", V);
    cuda_launch::set_device(dev.index);
    // the partials are a temporary: the caching allocator reuses it only for work enqueued later
    Tensor scratch = Tensor::empty({static_cast<int64_t>(cuda::sample_scratch_bytes(N, V))}, DType::U8, dev);
    cuda::sample_tokens(logits.data<float>(), static_cast<const uint8_t*>(rows.raw()), out.data<int32_t>(), N, V,
                        scratch.raw());
    return;
#else
    fail("sample_tokens: tensors are on {} but this build has no CUDA", dev.str());
#endif
  }
  for (int64_t i = 0; i < N; ++i) {
    SamplingRow r;
    std::memcpy(&r, static_cast<const uint8_t*>(rows.raw()) + i * sizeof(SamplingRow), sizeof r);
    out.data<int32_t>()[i] = sample_row(logits.data<float>() + i * V, V, r);
  }
}

}  // namespace dsa::ops
