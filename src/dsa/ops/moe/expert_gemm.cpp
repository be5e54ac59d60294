// CPU reference of the grouped expert GEMM (dequantize, fp32 dot products) and dispatch to CUDA.
#include "dsa/ops/moe/expert_gemm.h"

#include <algorithm>
#include <cstdlib>
#include <string_view>
#include <vector>

#include "dsa/core/device.h"
#include "dsa/core/dtype_conv.h"
#include "dsa/ops/moe/swiglu.h"
#ifdef DSA_WITH_CUDA
#include "dsa/ops/moe/cuda_ops.h"
#include "dsa/ops/moe/expert_gemm_cuda.h"
#endif

namespace dsa::ops {

static bool is_byte(DType t) { return t == DType::U8 || t == DType::I8 || t == DType::FP4X2 || t == DType::E8M0; }

const char* weight_format_name(WeightFormat f) {
  switch (f) {
    case WeightFormat::MXFP4: return "mxfp4";
    case WeightFormat::FP8Block: return "fp8";
    case WeightFormat::BF16: return "bf16";
  }
  return "?";
}

void ExpertWeights::validate(const char* what) const {
  DSA_CHECK(weight.defined() && weight.dim() == 3 && weight.is_contiguous(), "{}: weight must be contiguous [E][N][K..], got {}",
            what, weight.defined() ? weight.str() : "undefined");
  const int64_t E = weight.size(0), N = weight.size(1);
  if (format == WeightFormat::BF16) {
    DSA_CHECK(weight.dtype() == DType::BF16, "{}: BF16 weight dtype must be BF16, got {}", what, dtype_name(weight.dtype()));
    DSA_CHECK(!scale.defined(), "{}: BF16 weights take no scale, got {}", what, scale.str());
    return;
  }
  DSA_CHECK(format == WeightFormat::MXFP4 || format == WeightFormat::FP8Block, "{}: unknown weight format {}", what,
            static_cast<int>(format));
  DSA_CHECK(scale.defined() && scale.dim() == 3 && scale.is_contiguous(), "{}: scale must be contiguous 3-D, got {}", what,
            scale.defined() ? scale.str() : "undefined");
  DSA_CHECK(scale.device() == weight.device(), "{}: scale on {} but weight on {}", what, scale.device().str(),
            weight.device().str());
  if (format == WeightFormat::MXFP4) {
    DSA_CHECK(is_byte(weight.dtype()) && weight.dtype() != DType::E8M0, "{}: MXFP4 weight dtype must be I8/U8/FP4X2, got {}",
              what, dtype_name(weight.dtype()));
    const int64_t K = weight.size(2) * 2;
    DSA_CHECK(K % 32 == 0, "{}: MXFP4 K={} not a multiple of 32", what, K);
    DSA_CHECK(scale.dtype() == DType::E8M0 || scale.dtype() == DType::U8, "{}: MXFP4 scale dtype must be E8M0/U8, got {}",
              what, dtype_name(scale.dtype()));
    DSA_CHECK(scale.size(0) == E && scale.size(1) == N && scale.size(2) == K / 32,
              "{}: MXFP4 scale shape {} != [{}][{}][{}]", what, shape_str(scale.shape()), E, N, K / 32);
  } else {
    DSA_CHECK(weight.dtype() == DType::E4M3, "{}: FP8Block weight dtype must be E4M3, got {}", what,
              dtype_name(weight.dtype()));
    const int64_t K = weight.size(2);
    DSA_CHECK(scale.dtype() == DType::F32 || scale.dtype() == DType::E8M0 || scale.dtype() == DType::U8,
              "{}: FP8Block scale dtype must be F32 or E8M0, got {}", what, dtype_name(scale.dtype()));
    DSA_CHECK(scale.size(0) == E && scale.size(1) == (N + 127) / 128 && scale.size(2) == (K + 127) / 128,
              "{}: FP8Block scale shape {} != [{}][{}][{}]", what, shape_str(scale.shape()), E, (N + 127) / 128,
              (K + 127) / 128);
  }
}

int64_t ExpertWeights::bytes_per_expert() const {
  const size_t s = scale.defined() ? scale.nbytes() : 0;
  return static_cast<int64_t>((weight.nbytes() + s) / static_cast<size_t>(weight.size(0)));
}

static float fp8_scale_at(const ExpertWeights& w, int64_t e, int64_t nb, int64_t kb) {
  const int64_t NB = w.scale.size(1), KB = w.scale.size(2);
  const int64_t i = (e * NB + nb) * KB + kb;
  return w.scale.dtype() == DType::F32 ? w.scale.data<float>()[i] : ue8m0_to_f32(w.scale.data<uint8_t>()[i]);
}

Tensor dequantize_expert_f32(const ExpertWeights& w, int64_t e) {
  w.validate("dequantize_expert_f32");
  DSA_CHECK(!w.weight.device().is_cuda(), "dequantize_expert_f32: weights must be on the host");
  DSA_CHECK(e >= 0 && e < w.experts(), "dequantize_expert_f32: expert {} outside [0, {})", e, w.experts());
  const int64_t N = w.n(), K = w.k();
  Tensor out = Tensor::empty({N, K}, DType::F32);
  float* o = out.data<float>();
  if (w.format == WeightFormat::MXFP4) {
    const uint8_t* p = w.weight.data<uint8_t>() + e * N * (K / 2);
    const uint8_t* s = w.scale.data<uint8_t>() + e * N * (K / 32);
    for (int64_t n = 0; n < N; ++n)
      for (int64_t k = 0; k < K; ++k) {
        uint8_t byte = p[n * (K / 2) + k / 2];
        uint8_t code = (k & 1) ? (byte >> 4) : (byte & 0xF);
        o[n * K + k] = e2m1_to_f32(code) * ue8m0_to_f32(s[n * (K / 32) + k / 32]);
      }
  } else if (w.format == WeightFormat::BF16) {
    const uint16_t* p = w.weight.data<uint16_t>() + e * N * K;
    for (int64_t i = 0; i < N * K; ++i) o[i] = bf16_bits_to_f32(p[i]);
  } else {
    const uint8_t* p = w.weight.data<uint8_t>() + e * N * K;
    for (int64_t n = 0; n < N; ++n)
      for (int64_t k = 0; k < K; ++k) o[n * K + k] = e4m3_to_f32(p[n * K + k]) * fp8_scale_at(w, e, n / 128, k / 128);
  }
  return out;
}

// kExpertGemmGemvMaxRowsPerExpert, or 0 (no GEMV in the automatic rule) with DSA_MOE_GEMV=0.
static double gemv_max_rows_per_expert() {
  static const double v = [] {
    const char* e = std::getenv("DSA_MOE_GEMV");
    return e && std::string_view(e) == "0" ? 0.0 : kExpertGemmGemvMaxRowsPerExpert;
  }();
  return v;
}

int resolve_expert_gemm_tactic(WeightFormat f, const ExpertGemmParams& p, int64_t rows, int64_t experts, bool grouped,
                               int64_t K) {
  int t = p.tactic;
  if (t < 0) {
    const double per_group = p.rows_per_expert_hint > 0 ? p.rows_per_expert_hint
                             : grouped                  ? static_cast<double>(rows) / static_cast<double>(std::max<int64_t>(1, experts))
                                                        : static_cast<double>(rows);
    if (per_group >= 32)
      t = 1;  // prefill: 64-row tiles
    else if (f == WeightFormat::MXFP4 && grouped && per_group <= gemv_max_rows_per_expert())
      t = 9;  // decode, ~1 row per used expert: the GEMV kernel (H200, 2026-12-02: V4-Flash T = 1 1.68x)
    else if (f == WeightFormat::BF16)
      t = 0;
    else if (f == WeightFormat::MXFP4)
      t = 5;  // stream kernel, 64 weight rows per CTA, 3 stages of 256 k
    else if (!grouped && rows <= 8)
      // Dense FP8 decode linears (H200, 2026-12-03, device time in a graph over cold weights,
      // docs/perf/linear-decode-2026-12-03.md): the k-split stream form, 128 weight rows per CTA
      // for long rows (GLM o_proj K = 16384 at T = 1: 31.0 us against 42.5 for tactic 3).
      t = K >= 16384 || (K >= 8192 && rows == 1) ? 6 : 4;
    else  // FP8: 128 weight rows per CTA when only a few experts are used (T = 1), else 64
      t = per_group < 0.1 ? 6 : 3;
  }
  if (t == 1 && grouped && p.m_alignment % 64 != 0) t = 0;
  return t;
}

namespace {

// CTA tile of a tactic, as the launchers build it (cuda/expert_gemm_{mxfp4,fp8,bf16}.cu and
// cuda/expert_gemm_stream_{mxfp4,fp8}.cu): layout rows, weight rows, 128-k chunks per stage.
struct CtaTile {
  int rows, wrows, kch;
};
CtaTile cta_tile(WeightFormat f, int t, int64_t rows, bool dense) {
  if (f == WeightFormat::BF16) return {t == 1 ? 64 : 16, 64, 1};  // no stream form: tiles 0 / 2
  if (t >= 9) return {8, 64, 1};  // GEMV kernel: 8 token rows, 64 weight rows, one chunk per step
  if (t >= 3) {  // stream kernel: 8 token rows, 64 MW weight rows
    const bool fp8 = f == WeightFormat::FP8Block;
    const int mw = (fp8 ? t == 6 : t == 8) ? 2 : 1;
    const int kch = (fp8 ? (t == 5 || t == 8) : (t == 5 || t == 7)) ? 2 : 1;
    return {8, 64 * mw, kch};
  }
  if (t == 1) {
    if (f == WeightFormat::MXFP4) return {64, 128, 1};
    return dense && rows <= 32 ? CtaTile{32, 128, 1} : CtaTile{64, 64, 1};
  }
  return {16, 64, 1};
}

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

}  // namespace

ExpertGemmSplit expert_gemm_split(WeightFormat f, int tactic, int64_t rows, int64_t N, int64_t K, bool swiglu,
                                  int sm_count, int requested) {
  const int nk = static_cast<int>(K / 128);
  const ExpertGemmSplit none{1, nk};
  if (requested == 1 || nk < 2 || rows <= 0 || N <= 0) return none;
  const CtaTile tl = cta_tile(f, tactic, rows, true);
  int64_t want;
  if (requested > 1) {
    want = std::min<int64_t>(requested, nk);
  } else {
    if (f != WeightFormat::FP8Block) return none;
    const int64_t ncols = swiglu ? N / 2 : N, bn = swiglu ? tl.wrows / 2 : tl.wrows;
    const int64_t ctas = ceil_div(rows, tl.rows) * ceil_div(ncols, bn);
    if (ctas >= sm_count) return none;
    want = ceil_div(2 * static_cast<int64_t>(std::max(sm_count, 1)), ctas);
    want = std::min<int64_t>({want, nk / 2, 16, K / (16 * rows)});
    if (want < 2) return none;
  }
  int64_t chunks = ceil_div(nk, want);
  if (tl.kch > 1 && nk % tl.kch == 0 && chunks % tl.kch != 0) chunks += tl.kch - chunks % tl.kch;
  const int64_t splits = ceil_div(nk, chunks);
  if (splits < 2) return none;
  return {static_cast<int>(splits), static_cast<int>(chunks)};
}

ExpertGemmSplit expert_gemm_planned_split(const ExpertWeights& w, int64_t rows, bool grouped, const ExpertGemmParams& p,
                                          Device dev) {
  const ExpertGemmSplit none{1, static_cast<int>(w.k() / 128)};
  if (!dev.is_cuda() || grouped) return none;
  const auto& devs = cuda_devices();
  const int sm = dev.index >= 0 && dev.index < static_cast<int>(devs.size()) ? devs[dev.index].sm_count : 0;
  if (sm <= 0 && p.k_splits < 2) return none;
  const int tactic = resolve_expert_gemm_tactic(w.format, p, rows, w.experts(), false, w.k());
  return expert_gemm_split(w.format, tactic, rows, w.n(), w.k(), p.fuse_swiglu, sm, p.k_splits);
}

void validate_expert_gemm(const Tensor& a, const Tensor& a_rows, const Tensor& m_indices, const ExpertWeights& w,
                          const Tensor& out, const ExpertGemmParams& p) {
  w.validate("expert_gemm: weights");
  const int64_t N = w.n(), K = w.k(), E = w.experts();
  DSA_CHECK(a.defined() && a.dim() == 2 && a.dtype() == DType::BF16 && a.size(1) == K && a.is_contiguous(),
            "expert_gemm: a must be contiguous bf16 [rows][{}], got {}", K, a.defined() ? a.str() : "undefined");
  DSA_CHECK(K % 128 == 0 && K > 0, "expert_gemm: K={} must be a positive multiple of 128", K);
  DSA_CHECK(N % (p.fuse_swiglu ? 16 : 8) == 0 && N > 0, "expert_gemm: N={} must be a positive multiple of {}", N,
            p.fuse_swiglu ? 16 : 8);
  DSA_CHECK(p.swiglu_limit >= 0.f, "expert_gemm: swiglu_limit {} must be >= 0", p.swiglu_limit);
  DSA_CHECK(p.tactic >= -1 && p.tactic < kExpertGemmTactics, "expert_gemm: tactic {} outside [-1, {}]", p.tactic,
            kExpertGemmTactics - 1);
  DSA_CHECK(p.k_splits == -1 || p.k_splits >= 1, "expert_gemm: k_splits {} must be -1 (auto) or >= 1", p.k_splits);
  DSA_CHECK(p.k_splits <= 1 || !m_indices.defined(), "expert_gemm: k_splits {} needs a dense call (no m_indices)",
            p.k_splits);
  int64_t rows = a.size(0);
  if (m_indices.defined()) {
    DSA_CHECK(m_indices.dim() == 1 && m_indices.dtype() == DType::I32 && m_indices.is_contiguous(),
              "expert_gemm: m_indices must be contiguous i32 [rows], got {}", m_indices.str());
    rows = m_indices.size(0);
    DSA_CHECK(p.m_alignment >= 16 && p.m_alignment % 16 == 0, "expert_gemm: m_alignment {} must be a positive multiple of 16",
              p.m_alignment);
    DSA_CHECK(p.tactic != 1 || p.m_alignment % 64 == 0, "expert_gemm: tactic 1 (64-row tiles) needs m_alignment % 64 == 0, got {}",
              p.m_alignment);
  } else {
    DSA_CHECK(E == 1, "expert_gemm: dense mode (no m_indices) needs exactly one expert, weights have {}", E);
  }
  if (a_rows.defined()) {
    a_rows.check("expert_gemm: a_rows", DType::I32, {rows});
    DSA_CHECK(a_rows.is_contiguous(), "expert_gemm: a_rows must be contiguous");
  } else {
    DSA_CHECK(a.size(0) >= rows, "expert_gemm: a has {} rows, layout needs {}", a.size(0), rows);
  }
  const DType odt = out.defined() && out.dtype() == DType::F32 && !m_indices.defined() ? DType::F32 : DType::BF16;
  out.check(m_indices.defined() ? "expert_gemm: out" : "expert_gemm: out (bf16 or f32)", odt, {rows, p.fuse_swiglu ? N / 2 : N});
  DSA_CHECK(out.is_contiguous(), "expert_gemm: out must be contiguous");
  const Device d = a.device();
  DSA_CHECK(w.weight.device() == d && out.device() == d && (!m_indices.defined() || m_indices.device() == d) &&
                (!a_rows.defined() || a_rows.device() == d),
            "expert_gemm: all tensors must be on {}", d.str());
}

void expert_gemm(const Tensor& a, const Tensor& a_rows, const Tensor& m_indices, const ExpertWeights& w, Tensor& out,
                 const ExpertGemmParams& p) {
  validate_expert_gemm(a, a_rows, m_indices, w, out, p);
  if (a.device().is_cuda()) {
#ifdef DSA_WITH_CUDA
    if (m_indices.defined())
      cuda::expert_gemm(a, a_rows, m_indices, w, out, p);
    else
      cuda::expert_gemm_dense(a, a_rows, w, out, p);  // split-K, bf16 or f32 out
    return;
#else
    fail("expert_gemm: no CUDA in this build");
#endif
  }
  const int64_t N = w.n(), K = w.k(), E = w.experts(), rows = out.size(0);
  const int64_t n_out = out.size(1);
  std::vector<Tensor> deq(E);  // dequantized lazily, once per used expert
  std::vector<float> acc(N), arow(K);
  for (int64_t r = 0; r < rows; ++r) {
    const int32_t e = m_indices.defined() ? m_indices.data<int32_t>()[r] : 0;
    if (e < 0 || e >= E) continue;  // padding row: not written
    const int64_t src = a_rows.defined() ? a_rows.data<int32_t>()[r] : r;
    if (src < 0 || src >= a.size(0)) {
      std::fill(arow.begin(), arow.end(), 0.f);
    } else {
      for (int64_t k = 0; k < K; ++k) arow[k] = bf16_bits_to_f32(a.data<uint16_t>()[src * K + k]);
    }
    if (!deq[e].defined()) deq[e] = dequantize_expert_f32(w, e);
    const float* W = deq[e].data<float>();
    for (int64_t n = 0; n < N; ++n) {
      double s = 0;
      for (int64_t k = 0; k < K; ++k) s += static_cast<double>(arow[k]) * W[n * K + k];
      acc[n] = static_cast<float>(s);
    }
    const bool f32 = out.dtype() == DType::F32;
    for (int64_t c = 0; c < n_out; ++c) {
      const float v = p.fuse_swiglu ? swiglu_value(acc[c], acc[n_out + c], p.swiglu_limit) : acc[c];
      if (f32)
        out.data<float>()[r * n_out + c] = v;
      else
        out.data<uint16_t>()[r * n_out + c] = f32_to_bf16_bits(v);
    }
  }
}

}  // namespace dsa::ops
