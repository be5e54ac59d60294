#include "dsa/ops/compressor/compressor.h"

#include <cmath>
#include <limits>
#include <vector>

#include "dsa/ops/norm/elem.h"
#ifdef DSA_WITH_CUDA
#include "dsa/ops/compressor/compressor_cuda.h"
#include "dsa/core/cuda_launch.h"
#include "dsa/ops/norm/norm_cuda.h"
#include "dsa/ops/rope/rope_cuda.h"
#endif

namespace dsa::ops {

CompressorConfig CompressorConfig::v4(int64_t ratio, int64_t head_dim, float norm_eps) {
  CompressorConfig c;
  c.ratio = ratio;
  c.overlap = ratio == 4;
  c.head_dim = head_dim;
  c.norm_eps = norm_eps;
  c.rope = RopeConfig::v4_compress();
  return c;
}

void CompressorConfig::validate() const {
  DSA_CHECK(ratio >= 1, "CompressorConfig.ratio must be >= 1, got {}", ratio);
  DSA_CHECK(head_dim >= 1, "CompressorConfig.head_dim must be >= 1, got {}", head_dim);
  DSA_CHECK(std::isfinite(norm_eps) && norm_eps >= 0.f, "CompressorConfig.norm_eps must be finite and >= 0, got {}",
            norm_eps);
  rope.validate();
  DSA_CHECK(rope.rope_dim <= head_dim, "CompressorConfig: rope_dim {} exceeds head_dim {}", rope.rope_dim, head_dim);
}

CompressorState CompressorState::create(const CompressorConfig& cfg, Device dev) {
  cfg.validate();
  CompressorState s;
  s.kv = Tensor::empty({cfg.coff() * cfg.ratio, cfg.width()}, DType::F32, dev);
  s.score = Tensor::empty({cfg.coff() * cfg.ratio, cfg.width()}, DType::F32, dev);
  s.reset();
  return s;
}

void CompressorState::reset() {
  next_pos = 0;
  DSA_CHECK(kv.defined() && score.defined(), "CompressorState::reset: state was not created");
  Tensor hk = Tensor::empty(kv.shape(), DType::F32), hs = Tensor::empty(score.shape(), DType::F32);
  for (int64_t i = 0; i < hk.numel(); ++i) {
    hk.data<float>()[i] = 0.f;
    hs.data<float>()[i] = -std::numeric_limits<float>::infinity();
  }
  kv.copy_from(hk);
  score.copy_from(hs);
}

int64_t compressor_entries_emitted(const CompressorConfig& cfg, int64_t start_pos, int64_t tokens) {
  DSA_CHECK(cfg.ratio >= 1 && start_pos >= 0 && tokens >= 0, "compressor_entries_emitted: bad arguments ({}, {}, {})",
            cfg.ratio, start_pos, tokens);
  return (start_pos + tokens) / cfg.ratio - start_pos / cfg.ratio;
}

namespace {

void check_input(const char* name, const Tensor& t, const Shape& shape, bool f32_only, const Device& dev) {
  DSA_CHECK(t.defined(), "compressor_forward: {} is undefined", name);
  DSA_CHECK(t.device() == dev, "compressor_forward: {} is on {} but the state is on {}", name, t.device().str(),
            dev.str());
  if (f32_only)
    DSA_CHECK(t.dtype() == DType::F32, "compressor_forward: {} must be f32, got {}", name, dtype_name(t.dtype()));
  else
    check_activation_dtype(fmt::format("compressor_forward: {}", name), t.dtype());
  DSA_CHECK(t.shape() == shape, "compressor_forward: {} must have shape {}, got {}", name, shape_str(shape),
            shape_str(t.shape()));
  DSA_CHECK(t.is_contiguous(), "compressor_forward: {} must be contiguous", name);
}

// Pools the state's rows into one entry (double), normalises it and writes row `row` of out.
void emit_entry(const CompressorConfig& cfg, const CompressorState& st, const Tensor& norm_weight, const Tensor& out,
                int64_t row) {
  const int64_t m = cfg.ratio, d = cfg.head_dim, W = cfg.width();
  const float* kv = st.kv.data<float>();
  const float* sc = st.score.data<float>();
  // (row index in the state, column offset) of the 2m (overlap) or m pooled rows.
  std::vector<double> pooled(static_cast<size_t>(d));
  std::vector<std::pair<int64_t, int64_t>> rows;
  if (cfg.overlap) {
    for (int64_t r = 0; r < m; ++r) rows.push_back({r, 0});      // previous window, Ca = dims [0, d)
    for (int64_t r = 0; r < m; ++r) rows.push_back({m + r, d});  // open window, Cb = dims [d, 2d)
  } else {
    for (int64_t r = 0; r < m; ++r) rows.push_back({r, 0});
  }
  for (int64_t k = 0; k < d; ++k) {
    double mx = -std::numeric_limits<double>::infinity();
    for (auto [r, c] : rows) mx = std::max(mx, static_cast<double>(sc[r * W + c + k]));
    double den = 0.0, num = 0.0;
    for (auto [r, c] : rows) {
      const double s = sc[r * W + c + k];
      if (s == -std::numeric_limits<double>::infinity()) continue;  // no token in this row: weight 0
      const double e = std::exp(s - mx);
      den += e;
      num += e * kv[r * W + c + k];
    }
    pooled[static_cast<size_t>(k)] = num / den;
  }
  double ss = 0.0;
  for (double v : pooled) ss += v * v;
  const double inv = 1.0 / std::sqrt(ss / static_cast<double>(d) + cfg.norm_eps);
  for (int64_t k = 0; k < d; ++k)
    store_f(out.raw(), out.dtype(), row * d + k,
            static_cast<float>(pooled[static_cast<size_t>(k)] * inv * load_f(norm_weight.raw(), norm_weight.dtype(), k)));
}

}  // namespace

CompressorResult compressor_forward(const CompressorConfig& cfg, CompressorState& state, const Tensor& kv,
                                    const Tensor& score, const Tensor& ape, const Tensor& norm_weight,
                                    const Tensor& entries_out) {
  cfg.validate();
  const int64_t m = cfg.ratio, d = cfg.head_dim, W = cfg.width();
  DSA_CHECK(state.kv.defined() && state.kv.shape() == (Shape{cfg.coff() * m, W}) && state.score.defined() &&
                state.score.shape() == state.kv.shape() && state.kv.dtype() == DType::F32 &&
                state.score.dtype() == DType::F32,
            "compressor_forward: state does not match the config (create it with CompressorState::create)");
  DSA_CHECK(state.next_pos >= 0, "compressor_forward: state.next_pos is negative ({})", state.next_pos);
  DSA_CHECK(kv.defined() && kv.dim() == 2, "compressor_forward: kv must be [T][{}], got {}", W,
            kv.defined() ? kv.str() : "undefined");
  const int64_t T = kv.size(0);
  const Device dev = state.kv.device();
  DSA_CHECK(state.score.device() == dev, "compressor_forward: state kv and score on different devices");
  check_input("kv", kv, {T, W}, false, dev);
  check_input("score", score, {T, W}, false, dev);
  check_input("ape", ape, {m, W}, true, dev);
  check_input("norm_weight", norm_weight, {d}, false, dev);
  const int64_t emitted = compressor_entries_emitted(cfg, state.next_pos, T);
  DSA_CHECK(entries_out.defined() && entries_out.dim() == 2 && entries_out.size(1) == d &&
                entries_out.size(0) >= emitted,
            "compressor_forward: entries_out must be [>= {}][{}], got {}", emitted, d,
            entries_out.defined() ? entries_out.str() : "undefined");
  check_input("entries_out", entries_out, entries_out.shape(), false, dev);

  CompressorResult res;
  res.first_entry = state.next_pos / m;  // windows closed before next_pos
  if (dev.is_cuda()) {
#ifdef DSA_WITH_CUDA
    res.count = emitted;
    // Pool into an f32 buffer (entries_out itself when it is f32), then RMSNorm into
    // entries_out, then RoPE in place at positions (first_entry + i) * m.
    Tensor pooled = entries_out.dtype() == DType::F32 ? entries_out : Tensor::empty({emitted, d}, DType::F32, dev);
    cuda::CompressorPoolArgs pa{};
    pa.kv = kv.raw();
    pa.score = score.raw();
    pa.kv_dtype = kv.dtype();
    pa.score_dtype = score.dtype();
    pa.ape = ape.data<float>();
    pa.state_kv = state.kv.data<float>();
    pa.state_score = state.score.data<float>();
    pa.pooled = pooled.data<float>();
    pa.tokens = T;
    pa.start_pos = state.next_pos;
    pa.ratio = m;
    pa.head_dim = d;
    pa.overlap = cfg.overlap;
    cuda_launch::set_device(dev.index);
    cuda::compressor_pool(pa);
    state.next_pos += T;
    if (emitted == 0) return res;
    cuda::RowNormArgs na{};
    na.x = pooled.raw();
    na.out = entries_out.raw();
    na.weight = norm_weight.raw();
    na.rows = emitted;
    na.cols = d;
    na.x_row_stride = d;
    na.out_row_stride = d;
    na.x_dtype = DType::F32;
    na.out_dtype = entries_out.dtype();
    na.weight_dtype = norm_weight.dtype();
    na.bias_dtype = DType::F32;
    na.eps = cfg.norm_eps;
    cuda::row_norm(na);
    cuda::RopeArgs ra{};
    ra.x = static_cast<char*>(entries_out.raw()) + (d - cfg.rope.rope_dim) * static_cast<int64_t>(dtype_size(entries_out.dtype()));
    ra.positions = nullptr;
    ra.pos_base = res.first_entry * m;
    ra.pos_step = m;
    ra.dtype = entries_out.dtype();
    ra.tokens = emitted;
    ra.heads = 1;
    ra.token_stride = d;
    ra.offset = d - cfg.rope.rope_dim;
    ra.pairs = static_cast<int>(cfg.rope.rope_dim / 2);
    ra.attention_factor = static_cast<float>(cfg.rope.attention_factor);
    std::vector<float> f = rope_inv_freq(cfg.rope);
    for (int i = 0; i < ra.pairs; ++i) ra.inv_freq[i] = f[static_cast<size_t>(i)];
    cuda::rope(ra);
    return res;
#else
    fail("compressor_forward: tensors are on {} but this build has no CUDA", dev.str());
#endif
  }
  float* skv = state.kv.data<float>();
  float* ssc = state.score.data<float>();
  const int64_t open = cfg.overlap ? m : 0;  // first row of the open window in the state
  for (int64_t t = 0; t < T; ++t) {
    const int64_t pos = state.next_pos + t, slot = pos % m;
    for (int64_t c = 0; c < W; ++c) {
      skv[(open + slot) * W + c] = load_f(kv.raw(), kv.dtype(), t * W + c);
      ssc[(open + slot) * W + c] = load_f(score.raw(), score.dtype(), t * W + c) + ape.data<float>()[slot * W + c];
    }
    if (slot != m - 1) continue;
    emit_entry(cfg, state, norm_weight, entries_out, res.count);
    ++res.count;
    if (cfg.overlap) {  // the closed window becomes the previous window of the next one
      for (int64_t i = 0; i < m * W; ++i) {
        skv[i] = skv[m * W + i];
        ssc[i] = ssc[m * W + i];
      }
    }
  }
  state.next_pos += T;
  DSA_CHECK(res.count == emitted, "compressor_forward: internal error, emitted {} entries, expected {}", res.count,
            emitted);
  if (res.count > 0) {
    // RoPE at the window's first position w * m, on the trailing rope_dim dims.
    Tensor pos = Tensor::empty({res.count}, DType::I64);
    for (int64_t i = 0; i < res.count; ++i) pos.data<int64_t>()[i] = (res.first_entry + i) * m;
    RopeParams rp;
    rp.offset = d - cfg.rope.rope_dim;
    apply_rope_cpu(entries_out.slice(0, 0, res.count), pos, cfg.rope, rp);
  }
  return res;
}

}  // namespace dsa::ops
