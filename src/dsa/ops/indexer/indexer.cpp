#include "dsa/ops/indexer/indexer.h"

#include <algorithm>
#include <cstdlib>
#include <string_view>
#include <cmath>
#include <limits>
#include <numeric>
#include <vector>

#include "dsa/ops/norm/elem.h"
#ifdef DSA_WITH_CUDA
#include "dsa/ops/indexer/indexer_cuda.h"
#include "dsa/core/cuda_launch.h"
#endif

namespace dsa::ops {

IndexerParams IndexerParams::v4(int64_t topk, int64_t n_heads, int64_t head_dim, int64_t ratio) {
  IndexerParams p;
  p.topk = topk;
  p.ratio = ratio;
  p.scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(head_dim)) / std::sqrt(static_cast<double>(n_heads)));
  return p;
}

IndexerParams IndexerParams::glm(int64_t topk, int64_t n_heads, int64_t head_dim) {
  return v4(topk, n_heads, head_dim, 1);
}

void IndexerParams::validate() const {
  DSA_CHECK(topk >= 1, "IndexerParams.topk must be >= 1, got {}", topk);
  DSA_CHECK(ratio >= 1, "IndexerParams.ratio must be >= 1, got {}", ratio);
  DSA_CHECK(std::isfinite(scale) && scale > 0.f, "IndexerParams.scale must be finite and > 0, got {}", scale);
}

namespace {

enum class Kind { Act, Pos, I32, F32 };

void check(const char* op, const char* name, const Tensor& t, const Shape& shape, Kind kind, const Device& dev) {
  DSA_CHECK(t.defined(), "{}: {} is undefined", op, name);
  DSA_CHECK(t.device() == dev, "{}: {} is on {} but the other tensors on {}", op, name, t.device().str(), dev.str());
  if (kind == Kind::Act) check_activation_dtype(fmt::format("{}: {}", op, name), t.dtype());
  if (kind == Kind::Pos)
    DSA_CHECK(t.dtype() == DType::I32 || t.dtype() == DType::I64, "{}: {} must be i32 or i64, got {}", op, name,
              dtype_name(t.dtype()));
  if (kind == Kind::I32) DSA_CHECK(t.dtype() == DType::I32, "{}: {} must be i32, got {}", op, name, dtype_name(t.dtype()));
  if (kind == Kind::F32) DSA_CHECK(t.dtype() == DType::F32, "{}: {} must be f32, got {}", op, name, dtype_name(t.dtype()));
  DSA_CHECK(t.shape() == shape, "{}: {} must have shape {}, got {}", op, name, shape_str(shape), shape_str(t.shape()));
  DSA_CHECK(t.is_contiguous(), "{}: {} must be contiguous", op, name);
}

int64_t load_pos(const Tensor& positions, int64_t t) {
  return positions.dtype() == DType::I64 ? positions.data<int64_t>()[t] : positions.data<int32_t>()[t];
}

// Visible entries of the token at `pos` (CPU: checked against N).
int64_t visible_cpu(const char* op, int64_t t, int64_t pos, int64_t ratio, int64_t N) {
  DSA_CHECK(pos >= 0, "{}: positions[{}] = {} is negative", op, t, pos);
  const int64_t visible = (pos + 1) / ratio;
  DSA_CHECK(visible <= N, "{}: token {} at position {} sees {} entries but only {} keys were given", op, t, pos,
            visible, N);
  DSA_CHECK(visible <= std::numeric_limits<int32_t>::max(), "{}: {} entries overflow i32 indices", op, visible);
  return visible;
}

struct Dims {
  int64_t T, H, D, N;
};

Dims check_scores(const Tensor& q, const Tensor& keys, const Tensor& weights, const Tensor& positions,
                  const IndexerParams& p, const Tensor& scores) {
  const char* op = "indexer_scores";
  p.validate();
  DSA_CHECK(q.defined() && q.dim() == 3, "{}: q must be [T][H][D], got {}", op, q.defined() ? q.str() : "undefined");
  DSA_CHECK(keys.defined() && keys.dim() == 2, "{}: keys must be [N][D], got {}", op,
            keys.defined() ? keys.str() : "undefined");
  Dims d{q.size(0), q.size(1), q.size(2), keys.size(0)};
  const Device dev = q.device();
  check(op, "q", q, {d.T, d.H, d.D}, Kind::Act, dev);
  check(op, "keys", keys, {d.N, d.D}, Kind::Act, dev);
  check(op, "weights", weights, {d.T, d.H}, Kind::Act, dev);
  check(op, "positions", positions, {d.T}, Kind::Pos, dev);
  check(op, "scores", scores, {d.T, d.N}, Kind::F32, dev);
  return d;
}

void scores_cpu(const Tensor& q, const Tensor& keys, const Tensor& weights, const Tensor& positions,
                const IndexerParams& p, const Tensor& scores, const Dims& d) {
  for (int64_t t = 0; t < d.T; ++t) {
    const int64_t visible = visible_cpu("indexer_scores", t, load_pos(positions, t), p.ratio, d.N);
    for (int64_t e = 0; e < d.N; ++e) {
      double acc = -std::numeric_limits<double>::infinity();
      if (e < visible) {
        acc = 0.0;
        for (int64_t h = 0; h < d.H; ++h) {
          double dot = 0.0;
          for (int64_t k = 0; k < d.D; ++k)
            dot += static_cast<double>(load_f(q.raw(), q.dtype(), (t * d.H + h) * d.D + k)) *
                   load_f(keys.raw(), keys.dtype(), e * d.D + k);
          acc += static_cast<double>(load_f(weights.raw(), weights.dtype(), t * d.H + h)) * p.scale * std::max(dot, 0.0);
        }
      }
      scores.data<float>()[t * d.N + e] = static_cast<float>(acc);
    }
  }
}

void select_cpu(const Tensor& scores, const Tensor& positions, const IndexerParams& p, const Tensor& indices) {
  const int64_t T = scores.size(0), N = scores.size(1);
  std::vector<int32_t> order(static_cast<size_t>(N));
  for (int64_t t = 0; t < T; ++t) {
    const int64_t visible = visible_cpu("topk_select", t, load_pos(positions, t), p.ratio, N);
    const float* s = scores.data<float>() + t * N;
    // Highest score first; ties: lower entry index first.
    const int64_t k = std::min(p.topk, visible);
    std::iota(order.begin(), order.begin() + visible, 0);
    std::partial_sort(order.begin(), order.begin() + k, order.begin() + visible,
                      [&](int32_t a, int32_t b) { return s[a] > s[b] || (s[a] == s[b] && a < b); });
    int32_t* out = indices.data<int32_t>() + t * p.topk;
    for (int64_t i = 0; i < p.topk; ++i) out[i] = i < k ? order[static_cast<size_t>(i)] : -1;
  }
}

void check_select(const Tensor& scores, const Tensor& positions, const IndexerParams& p, const Tensor& indices) {
  const char* op = "topk_select";
  p.validate();
  DSA_CHECK(scores.defined() && scores.dim() == 2, "{}: scores must be [T][N], got {}", op,
            scores.defined() ? scores.str() : "undefined");
  const int64_t T = scores.size(0);
  const Device dev = scores.device();
  check(op, "scores", scores, scores.shape(), Kind::F32, dev);
  check(op, "positions", positions, {T}, Kind::Pos, dev);
  check(op, "indices", indices, {T, p.topk}, Kind::I32, dev);
}

}  // namespace

void indexer_scores(const Tensor& q, const Tensor& keys, const Tensor& weights, const Tensor& positions,
                    const IndexerParams& p, const Tensor& scores) {
  Dims d = check_scores(q, keys, weights, positions, p, scores);
  if (!q.device().is_cuda()) return scores_cpu(q, keys, weights, positions, p, scores, d);
#ifdef DSA_WITH_CUDA
  DSA_CHECK(d.H * d.D + d.H <= cuda::kIndexerMaxQElems && d.D <= cuda::kIndexerMaxHeadDim,
            "indexer_scores: CUDA supports H*D + H <= {} and D <= {}, got H {} D {}", cuda::kIndexerMaxQElems,
            cuda::kIndexerMaxHeadDim, d.H, d.D);
  cuda::IndexerScoreArgs a{};
  a.q = q.raw();
  a.keys = keys.raw();
  a.weights = weights.raw();
  a.positions = positions.raw();
  a.positions_i64 = positions.dtype() == DType::I64;
  a.q_dtype = q.dtype();
  a.k_dtype = keys.dtype();
  a.w_dtype = weights.dtype();
  a.scores = scores.data<float>();
  a.T = d.T;
  a.H = d.H;
  a.D = d.D;
  a.N = d.N;
  a.ratio = p.ratio;
  a.scale = p.scale;
  cuda_launch::set_device(q.device().index);
  cuda::indexer_scores(a);
#else
  fail("indexer_scores: tensors are on {} but this build has no CUDA", q.device().str());
#endif
}

// DSA_INDEXER_FAST_SELECT=0 keeps the automatic rule off the fast select (read once), to compare
// or to step around it. On by default since it was timed: on the H200 (2026-12-04, 4K context,
// batch 1, CUDA graphs) it took the GLM-5.1 4-layer decode step from 1546 to 1469 us and the
// V4-Flash CSA layer from 231 to 222 us, with no change at batch 32 or in prefill.
static bool fast_select_in_auto() {
  static const bool on = [] {
    const char* e = std::getenv("DSA_INDEXER_FAST_SELECT");
    return e == nullptr || std::string_view(e) != "0";
  }();
  return on;
}

TopkSelectPath topk_select_path(int64_t rows, int64_t entries, TopkSelectPath path) {
  if (path != TopkSelectPath::Auto) return path;
  if (fast_select_in_auto() && entries <= kTopkSelectFastMaxEntries) return TopkSelectPath::Fast;
  return rows <= 64 && entries > 8192 ? TopkSelectPath::Wide : TopkSelectPath::PerRow;
}

bool topk_select_is_wide(int64_t rows, int64_t entries, TopkSelectPath path) {
  return topk_select_path(rows, entries, path) == TopkSelectPath::Wide;
}

void topk_select(const Tensor& scores, const Tensor& positions, const IndexerParams& p, const Tensor& indices) {
  check_select(scores, positions, p, indices);
  if (!scores.device().is_cuda()) return select_cpu(scores, positions, p, indices);
#ifdef DSA_WITH_CUDA
  DSA_CHECK(p.topk <= cuda::kIndexerMaxTopk, "topk_select: CUDA supports topk <= {}, got {}", cuda::kIndexerMaxTopk,
            p.topk);
  DSA_CHECK(scores.size(1) <= std::numeric_limits<int32_t>::max(), "topk_select: {} entries overflow i32 indices",
            scores.size(1));
  cuda::TopkSelectArgs a{};
  a.scores = scores.data<float>();
  a.positions = positions.raw();
  a.positions_i64 = positions.dtype() == DType::I64;
  a.indices = indices.data<int32_t>();
  a.T = scores.size(0);
  a.N = scores.size(1);
  a.ratio = p.ratio;
  a.topk = p.topk;
  const TopkSelectPath path = topk_select_path(a.T, a.N, p.select);
  if (path == TopkSelectPath::Fast) {
    static_assert(kTopkSelectFastMaxEntries == cuda::kIndexerFastMaxEntries);
    DSA_CHECK(a.N <= kTopkSelectFastMaxEntries, "topk_select: the fast path takes rows of at most {} entries, got {}",
              kTopkSelectFastMaxEntries, a.N);
    cuda_launch::set_device(scores.device().index);
    cuda::topk_select_fast(a);
    return;
  }
  Tensor cand, hist;  // the wide selection's scratch (step temporaries)
  if (path == TopkSelectPath::Wide) {
    cand = Tensor::empty({a.T, a.N}, DType::I32, scores.device());
    hist = Tensor::empty({a.T, cuda::kIndexerWideBins + 1}, DType::I32, scores.device());
    a.cand = cand.data<int32_t>();
    a.wide_hist = reinterpret_cast<uint32_t*>(hist.data<int32_t>());
  }
  cuda_launch::set_device(scores.device().index);
  cuda::topk_select(a);
#else
  fail("topk_select: tensors are on {} but this build has no CUDA", scores.device().str());
#endif
}

void indexer_topk(const Tensor& q, const Tensor& keys, const Tensor& weights, const Tensor& positions,
                  const IndexerParams& p, const Tensor& indices, const Tensor& scores) {
  Tensor s = scores;
  if (!s.defined()) {
    DSA_CHECK(q.defined() && q.dim() == 3 && keys.defined() && keys.dim() == 2,
              "indexer_topk: q must be [T][H][D] and keys [N][D]");
    s = Tensor::empty({q.size(0), keys.size(0)}, DType::F32, q.device());
  }
  indexer_scores(q, keys, weights, positions, p, s);
  topk_select(s, positions, p, indices);
}

}  // namespace dsa::ops
