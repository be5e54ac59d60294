// indexer_scores_paged (indexer.h): checks, the CPU reference and the CUDA dispatch.
#include <cmath>
#include <limits>

#include "dsa/formats/kv_layout.h"
#include "dsa/ops/indexer/indexer.h"
#include "dsa/ops/norm/elem.h"
#ifdef DSA_WITH_CUDA
#include "dsa/ops/indexer/indexer_cuda.h"
#include "dsa/core/cuda_launch.h"
#endif

namespace dsa::ops {

namespace {

constexpr int64_t kD = kv::indexer::kDim;

int64_t pos_of(const Tensor& positions, int64_t t) {
  return positions.dtype() == DType::I64 ? positions.data<int64_t>()[t] : positions.data<int32_t>()[t];
}

// The key of entry e of block-table row r as floats (false when it has no page).
bool load_key(const PagedIndexerKeys& k, int64_t num_pages, int64_t r, int64_t e, float* out) {
  const int64_t blocks = k.block_table.size(1);
  if (e / k.page_size >= blocks) return false;
  const int32_t page = k.block_table.data<int32_t>()[r * blocks + e / k.page_size];
  if (page < 0 || page >= num_pages) return false;
  const int64_t slot = static_cast<int64_t>(page) * k.page_size + e % k.page_size;
  const uint8_t* base = static_cast<const uint8_t*>(k.cache.raw());
  const uint8_t* codes = base + kv::indexer::key_offset(slot, k.page_size);
  float scale;
  std::memcpy(&scale, base + kv::indexer::scale_offset(slot, k.page_size), sizeof scale);
  for (int64_t c = 0; c < kD; ++c) out[c] = e4m3_to_f32(codes[c]) * scale;
  return true;
}

}  // namespace

void indexer_scores_paged(const Tensor& q, const PagedIndexerKeys& keys, const Tensor& weights, const Tensor& positions,
                          const IndexerParams& p, const Tensor& scores) {
  const char* op = "indexer_scores_paged";
  p.validate();
  DSA_CHECK(q.defined() && q.dim() == 3 && q.size(2) == kD && q.is_contiguous(), "{}: q must be contiguous [T][H][{}], got {}",
            op, kD, q.defined() ? q.str() : "undefined");
  check_activation_dtype(fmt::format("{}: q", op), q.dtype());
  const int64_t T = q.size(0), H = q.size(1);
  const Device dev = q.device();
  auto on_dev = [&](const char* name, const Tensor& t) {
    DSA_CHECK(t.defined() && t.is_contiguous() && t.device() == dev, "{}: {} must be a contiguous tensor on {}, got {}",
              op, name, dev.str(), t.defined() ? t.str() : "undefined");
  };
  on_dev("weights", weights);
  DSA_CHECK(weights.shape() == (Shape{T, H}), "{}: weights must be [{}][{}], got {}", op, T, H, weights.str());
  check_activation_dtype(fmt::format("{}: weights", op), weights.dtype());
  on_dev("positions", positions);
  DSA_CHECK(positions.shape() == (Shape{T}) && (positions.dtype() == DType::I32 || positions.dtype() == DType::I64),
            "{}: positions must be i32|i64 [{}], got {}", op, T, positions.str());
  on_dev("keys.cache", keys.cache);
  DSA_CHECK(keys.cache.dtype() == DType::U8, "{}: keys.cache must be u8, got {}", op, keys.cache.str());
  DSA_CHECK(keys.page_size >= 1, "{}: keys.page_size = {} (must be >= 1)", op, keys.page_size);
  on_dev("keys.block_table", keys.block_table);
  DSA_CHECK(keys.block_table.dtype() == DType::I32 && keys.block_table.dim() == 2,
            "{}: keys.block_table must be i32 [R][blocks], got {}", op, keys.block_table.str());
  on_dev("keys.token_req", keys.token_req);
  DSA_CHECK(keys.token_req.dtype() == DType::I32 && keys.token_req.shape() == (Shape{T}),
            "{}: keys.token_req must be i32 [{}], got {}", op, T, keys.token_req.str());
  on_dev("scores", scores);
  DSA_CHECK(scores.dtype() == DType::F32 && scores.dim() == 2 && scores.size(0) == T,
            "{}: scores must be f32 [{}][N], got {}", op, T, scores.str());
  const int64_t N = scores.size(1), R = keys.block_table.size(0);
  const int64_t num_pages = static_cast<int64_t>(keys.cache.nbytes() / kv::indexer::page_bytes(keys.page_size));
  if (T == 0 || N == 0) return;

  if (dev.is_cuda()) {
#ifdef DSA_WITH_CUDA
    DSA_CHECK(H <= cuda::kIndexerPagedMaxHeads, "{}: CUDA supports at most {} heads, got {}", op,
              cuda::kIndexerPagedMaxHeads, H);
    cuda::IndexerPagedScoreArgs a{};
    a.q = q.raw();
    a.weights = weights.raw();
    a.positions = positions.raw();
    a.positions_i64 = positions.dtype() == DType::I64;
    a.q_dtype = q.dtype();
    a.w_dtype = weights.dtype();
    a.cache = static_cast<const uint8_t*>(keys.cache.raw());
    a.page_size = keys.page_size;
    a.num_pages = num_pages;
    a.block_table = keys.block_table.data<int32_t>();
    a.blocks = keys.block_table.size(1);
    a.token_req = keys.token_req.data<int32_t>();
    a.num_requests = R;
    a.scores = scores.data<float>();
    a.T = T;
    a.H = H;
    a.N = N;
    a.ratio = p.ratio;
    a.scale = p.scale;
    cuda_launch::set_device(dev.index);
    cuda::indexer_scores_paged(a);
    return;
#else
    fail("{}: tensors are on {} but this build has no CUDA", op, dev.str());
#endif
  }
  std::vector<float> key(kD);
  for (int64_t t = 0; t < T; ++t) {
    const int64_t pos = pos_of(positions, t);
    DSA_CHECK(pos >= 0, "{}: positions[{}] = {} is negative", op, t, pos);
    const int32_t r = keys.token_req.data<int32_t>()[t];
    DSA_CHECK(r >= 0 && r < R, "{}: token {} has request row {} (block table of {} rows)", op, t, r, R);
    const int64_t visible = std::min<int64_t>((pos + 1) / p.ratio, N);
    for (int64_t e = 0; e < N; ++e) {
      double acc = -std::numeric_limits<double>::infinity();
      if (e < visible && load_key(keys, num_pages, r, e, key.data())) {
        acc = 0.0;
        for (int64_t h = 0; h < H; ++h) {
          double dot = 0.0;
          for (int64_t c = 0; c < kD; ++c)
            dot += static_cast<double>(load_f(q.raw(), q.dtype(), (t * H + h) * kD + c)) * key[c];
          acc += static_cast<double>(load_f(weights.raw(), weights.dtype(), t * H + h)) * p.scale * std::max(dot, 0.0);
        }
      }
      scores.data<float>()[t * N + e] = static_cast<float>(acc);
    }
  }
}

}  // namespace dsa::ops
