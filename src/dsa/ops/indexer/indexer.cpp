#include "dsa/ops/indexer/indexer.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <vector>

#include "dsa/ops/norm/elem.h"

namespace dsa::ops {

IndexerParams IndexerParams::v4(int64_t topk, int64_t n_heads, int64_t head_dim, int64_t ratio) {
  IndexerParams p;
  p.topk = topk;
  p.ratio = ratio;
  p.scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(head_dim)) / std::sqrt(static_cast<double>(n_heads)));
  return p;
}

IndexerParams IndexerParams::glm(int64_t topk, int64_t n_heads, int64_t head_dim) {
  IndexerParams p = v4(topk, n_heads, head_dim, 1);
  return p;
}

void IndexerParams::validate() const {
  DSA_CHECK(topk >= 1, "IndexerParams.topk must be >= 1, got {}", topk);
  DSA_CHECK(ratio >= 1, "IndexerParams.ratio must be >= 1, got {}", ratio);
  DSA_CHECK(std::isfinite(scale) && scale > 0.f, "IndexerParams.scale must be finite and > 0, got {}", scale);
}

namespace {
void check(const char* name, const Tensor& t, const Shape& shape, int kind /*0 act, 1 int pos, 2 i32, 3 f32*/) {
  DSA_CHECK(t.defined(), "indexer_topk: {} is undefined", name);
  DSA_CHECK(!t.device().is_cuda(), "indexer_topk: {} is on {}; only the CPU reference exists", name, t.device().str());
  if (kind == 0) check_activation_dtype(fmt::format("indexer_topk: {}", name), t.dtype());
  if (kind == 1)
    DSA_CHECK(t.dtype() == DType::I32 || t.dtype() == DType::I64, "indexer_topk: {} must be i32 or i64, got {}", name,
              dtype_name(t.dtype()));
  if (kind == 2) DSA_CHECK(t.dtype() == DType::I32, "indexer_topk: {} must be i32, got {}", name, dtype_name(t.dtype()));
  if (kind == 3) DSA_CHECK(t.dtype() == DType::F32, "indexer_topk: {} must be f32, got {}", name, dtype_name(t.dtype()));
  DSA_CHECK(t.shape() == shape, "indexer_topk: {} must have shape {}, got {}", name, shape_str(shape),
            shape_str(t.shape()));
  DSA_CHECK(t.is_contiguous(), "indexer_topk: {} must be contiguous", name);
}
}  // namespace

void indexer_topk(const Tensor& q, const Tensor& keys, const Tensor& weights, const Tensor& positions,
                  const IndexerParams& p, const Tensor& indices, const Tensor& scores) {
  p.validate();
  DSA_CHECK(q.defined() && q.dim() == 3, "indexer_topk: q must be [T][H][D], got {}", q.defined() ? q.str() : "undefined");
  DSA_CHECK(keys.defined() && keys.dim() == 2, "indexer_topk: keys must be [N][D], got {}",
            keys.defined() ? keys.str() : "undefined");
  const int64_t T = q.size(0), H = q.size(1), D = q.size(2), N = keys.size(0);
  check("q", q, {T, H, D}, 0);
  check("keys", keys, {N, D}, 0);
  check("weights", weights, {T, H}, 0);
  check("positions", positions, {T}, 1);
  check("indices", indices, {T, p.topk}, 2);
  if (scores.defined()) check("scores", scores, {T, N}, 3);

  std::vector<double> s(static_cast<size_t>(N));
  std::vector<int32_t> order(static_cast<size_t>(N));
  for (int64_t t = 0; t < T; ++t) {
    const int64_t pos = positions.dtype() == DType::I64 ? positions.data<int64_t>()[t] : positions.data<int32_t>()[t];
    DSA_CHECK(pos >= 0, "indexer_topk: positions[{}] = {} is negative", t, pos);
    const int64_t visible = (pos + 1) / p.ratio;
    DSA_CHECK(visible <= N, "indexer_topk: token {} at position {} sees {} entries but only {} keys were given", t, pos,
              visible, N);
    DSA_CHECK(visible <= std::numeric_limits<int32_t>::max(), "indexer_topk: {} entries overflow i32 indices", visible);
    for (int64_t e = 0; e < visible; ++e) {
      double acc = 0.0;
      for (int64_t h = 0; h < H; ++h) {
        double dot = 0.0;
        for (int64_t k = 0; k < D; ++k)
          dot += static_cast<double>(load_f(q.raw(), q.dtype(), (t * H + h) * D + k)) *
                 load_f(keys.raw(), keys.dtype(), e * D + k);
        const double w = static_cast<double>(load_f(weights.raw(), weights.dtype(), t * H + h)) * p.scale;
        acc += w * std::max(dot, 0.0);
      }
      s[static_cast<size_t>(e)] = acc;
    }
    if (scores.defined())
      for (int64_t e = 0; e < N; ++e)
        scores.data<float>()[t * N + e] =
            e < visible ? static_cast<float>(s[static_cast<size_t>(e)]) : -std::numeric_limits<float>::infinity();
    // Highest score first; ties: lower entry index first.
    const int64_t k = std::min(p.topk, visible);
    std::iota(order.begin(), order.begin() + visible, 0);
    std::partial_sort(order.begin(), order.begin() + k, order.begin() + visible, [&](int32_t a, int32_t b) {
      const double sa = s[static_cast<size_t>(a)], sb = s[static_cast<size_t>(b)];
      return sa > sb || (sa == sb && a < b);
    });
    int32_t* out = indices.data<int32_t>() + t * p.topk;
    for (int64_t i = 0; i < p.topk; ++i) out[i] = i < k ? order[static_cast<size_t>(i)] : -1;
  }
}

}  // namespace dsa::ops
