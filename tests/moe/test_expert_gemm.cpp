// Grouped expert GEMM: CPU reference against an independent dequantizer; CUDA (every tactic:
// the tile kernel's tiles and the decode stream kernel's forms; every weight format: MXFP4, FP8
// block with fp32 or UE8M0 scales, BF16; fused SwiGLU) against the CPU reference on the
// contiguous layout; the automatic tactic rule.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>

#include "common/testing.h"
#include "dsa/core/cuda_memory.h"
#include "dsa/core/cuda_stream.h"
#include "dsa/core/device.h"
#include "dsa/core/dtype_conv.h"
#include "dsa/ops/moe/expert_gemm.h"
#include "dsa/ops/moe/layout.h"
#include "dsa/ops/moe/swiglu.h"
#include "moe/moe_util.h"

using namespace dsa;
using namespace dsa::ops;
using namespace dsa::test;

namespace {

double silu_ref(double g) { return g / (1.0 + std::exp(-g)); }

// Independent reference of one row.
std::vector<float> row_ref(const std::vector<float>& W, const Tensor& a, int64_t src, int64_t N, int64_t K, bool swiglu,
                           float limit) {
  std::vector<double> acc(N, 0.0);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t k = 0; k < K; ++k) acc[n] += static_cast<double>(bf(a, src * K + k)) * W[n * K + k];
  if (!swiglu) return std::vector<float>(acc.begin(), acc.end());
  std::vector<float> o(N / 2);
  for (int64_t c = 0; c < N / 2; ++c) {
    double g = acc[c], u = acc[N / 2 + c];
    if (limit > 0) {
      g = std::min<double>(g, limit);
      u = std::max<double>(std::min<double>(u, limit), -limit);
    }
    o[c] = static_cast<float>(silu_ref(g) * u);
  }
  return o;
}

struct Case {
  Tensor ids;
  MoeLayout layout;
  Tensor x;
};

Case make_case(int64_t T, int64_t k, int64_t E, int64_t K, int mode, int64_t align, Rng& rng) {
  Case c;
  c.ids = Tensor::empty({T, k}, DType::I32);
  for (int64_t i = 0; i < T * k; ++i) {
    int32_t e = static_cast<int32_t>(rng.randint(0, E - 1));
    if (mode == 1) e = (i % k == 0) ? 1 : e;                 // expert 1 takes every token
    if (mode == 2) e = static_cast<int32_t>(rng.randint(0, 2));  // most experts empty
    if (rng.randint(0, 29) == 0) e = -1;
    c.ids.data<int32_t>()[i] = e;
  }
  c.layout = make_moe_layout(T, k, E, align, Device::cpu());
  build_moe_layout(c.ids, c.layout);
  c.x = random_bf16({T, K}, rng);
  return c;
}

// The layout's gather rows with every `every`-th used row pointed outside the T tokens (-1 or T:
// the kernels compute those as zero rows), and the rows that belong to an expert.
struct GatherRows {
  Tensor a_rows;               // [rows_cap] i32, host
  std::vector<int64_t> valid;  // rows with an expert
};
GatherRows gather_rows_with_holes(const Case& c, int64_t T, int64_t every) {
  GatherRows g;
  g.a_rows = Tensor::empty(c.layout.src_token.shape(), DType::I32);
  std::memcpy(g.a_rows.raw(), c.layout.src_token.contiguous().raw(), g.a_rows.nbytes());
  for (int64_t r = 0; r < g.a_rows.numel(); r += every)
    if (c.layout.m_indices.data<int32_t>()[r] >= 0) g.a_rows.data<int32_t>()[r] = r % 2 ? -1 : static_cast<int32_t>(T);
  for (int64_t r = 0; r < c.layout.rows_cap; ++r)
    if (c.layout.m_indices.data<int32_t>()[r] >= 0) g.valid.push_back(r);
  return g;
}

}  // namespace

TEST(ExpertGemm, CpuMatchesIndependentReference) {
  Rng rng;
  for (auto fmt : {0, 1, 2, 3})
    for (bool sw : {false, true}) {
      const int64_t T = 7, k = 2, E = 4, K = 256, N = 48;
      ExpertWeights w = random_experts(fmt, E, N, K, rng);
      Case c = make_case(T, k, E, K, 0, 16, rng);
      ExpertGemmParams p;
      p.fuse_swiglu = sw;
      p.swiglu_limit = 10.f;
      p.m_alignment = 16;
      Tensor out = Tensor::empty({c.layout.rows_cap, sw ? N / 2 : N}, DType::BF16);
      poison(out);
      expert_gemm(c.x, c.layout.src_token, c.layout.m_indices, w, out, p);
      for (int64_t r = 0; r < c.layout.rows_cap; ++r) {
        const int32_t e = c.layout.m_indices.data<int32_t>()[r];
        const int64_t cols = out.size(1);
        if (e < 0) {
          EXPECT_EQ(out.data<uint16_t>()[r * cols], 0xFFFF) << "padding row written";
          continue;
        }
        auto want = row_ref(dequant_ref(w, e), c.x, c.layout.src_token.data<int32_t>()[r], N, K, sw, 10.f);
        for (int64_t j = 0; j < cols; ++j) {
          const float g = bf(out, r * cols + j);
          ASSERT_TRUE(std::isfinite(g));
          ASSERT_NEAR(g, want[j], 8e-3 * std::fabs(want[j]) + 1e-5) << "fmt " << fmt << " row " << r << " col " << j;
        }
      }
    }
}

// BF16 weights need no dequantization, so the CPU op must equal the exact double-precision sum
// of bf16 x bf16 products rounded once to bf16 (bit for bit; with fused SwiGLU within one bf16
// step, because the op applies SwiGLU to float accumulators and the reference to doubles, which
// can land on either side of a bf16 rounding boundary), on awkward layouts: odd expert
// counts, T = 1, padding rows (-1), gathered rows including out-of-range sources (zero rows),
// dense mode, fused SwiGLU with and without clamp.
TEST(ExpertGemm, CpuBf16IsTheExactDoubleSum) {
  Rng rng;
  for (int64_t E : {1, 3, 5})
    for (int64_t T : {1, 6, 33})
      for (bool sw : {false, true}) {
        const int64_t k = E == 1 ? 1 : 2, K = 256, N = 48;
        const float limit = sw && T == 6 ? 0.f : 0.75f;
        SCOPED_TRACE(testing::Message() << "E=" << E << " T=" << T << " swiglu=" << sw);
        ExpertWeights w = random_bf16_experts(E, N, K, rng);
        Case c = make_case(T, k, E, K, 0, 16, rng);
        auto routed = [&] {  // make_case drops ids at random: T = 1 may route nothing
          for (int64_t r = 0; r < c.layout.rows_cap; ++r)
            if (c.layout.m_indices.data<int32_t>()[r] >= 0) return true;
          return false;
        };
        while (!routed()) c = make_case(T, k, E, K, 0, 16, rng);
        // Gather through the layout's src_token, with a few valid rows redirected out of range.
        Tensor a_rows = c.layout.src_token.contiguous();
        Tensor rows_copy = Tensor::empty(a_rows.shape(), DType::I32);
        std::memcpy(rows_copy.raw(), a_rows.raw(), a_rows.nbytes());
        for (int64_t r = 0; r < rows_copy.numel(); r += 5)
          if (c.layout.m_indices.data<int32_t>()[r] >= 0) rows_copy.data<int32_t>()[r] = r % 2 ? -1 : static_cast<int32_t>(T + 3);
        ExpertGemmParams p;
        p.fuse_swiglu = sw;
        p.swiglu_limit = limit;
        p.m_alignment = 16;
        const int64_t cols = sw ? N / 2 : N;
        Tensor out = Tensor::empty({c.layout.rows_cap, cols}, DType::BF16);
        poison(out);
        expert_gemm(c.x, rows_copy, c.layout.m_indices, w, out, p);
        int64_t checked = 0;
        for (int64_t r = 0; r < c.layout.rows_cap; ++r) {
          const int32_t e = c.layout.m_indices.data<int32_t>()[r];
          if (e < 0) {
            for (int64_t j = 0; j < cols; ++j) ASSERT_EQ(out.data<uint16_t>()[r * cols + j], 0xFFFF) << "padding row written";
            continue;
          }
          const int32_t src = rows_copy.data<int32_t>()[r];
          std::vector<float> want;
          if (src < 0 || src >= T) {
            want = std::vector<float>(static_cast<size_t>(cols), 0.f);  // zero activations (silu(0) * 0 too)
          } else {
            want = row_ref(dequant_ref(w, e), c.x, src, N, K, sw, limit);
          }
          for (int64_t j = 0; j < cols; ++j, ++checked) {
            const uint16_t g = out.data<uint16_t>()[r * cols + j], wb = f32_to_bf16_bits(want[j]);
            const int steps = std::abs(static_cast<int>(g) - static_cast<int>(wb));  // same sign: bf16 steps apart
            ASSERT_LE(steps, sw ? 1 : 0) << "row " << r << " col " << j << " got " << bf(out, r * cols + j)
                                         << " want " << want[j];
          }
        }
        EXPECT_GT(checked, 0);
      }
  // Dense mode (no m_indices): one expert, every row.
  ExpertWeights w = random_bf16_experts(1, 40, 128, rng);
  Tensor x = random_bf16({3, 128}, rng), out = Tensor::empty({3, 40}, DType::BF16);
  poison(out);
  expert_gemm(x, Tensor(), Tensor(), w, out);
  for (int64_t r = 0; r < 3; ++r) {
    auto want = row_ref(dequant_ref(w, 0), x, r, 40, 128, false, 0.f);
    for (int64_t j = 0; j < 40; ++j) ASSERT_EQ(out.data<uint16_t>()[r * 40 + j], f32_to_bf16_bits(want[j]));
  }
}

TEST(ExpertGemm, Bf16ValidationAndBytes) {
  Rng rng;
  ExpertWeights w = random_bf16_experts(3, 16, 128, rng);
  w.validate("t");
  EXPECT_EQ(w.k(), 128);
  EXPECT_EQ(w.bytes_per_expert(), 16 * 128 * 2);
  ExpertWeights bad = w;
  bad.scale = Tensor::empty({3, 1, 1}, DType::F32);
  EXPECT_THROW(bad.validate("t"), Error);  // BF16 takes no scale
  bad = w;
  bad.weight = Tensor::empty({3, 16, 128}, DType::E4M3);
  EXPECT_THROW(bad.validate("t"), Error);  // dtype must be bf16
  bad = random_fp8(3, 16, 128, rng);
  bad.format = WeightFormat::BF16;
  EXPECT_THROW(bad.validate("t"), Error);
  ExpertWeights fp8 = random_fp8(3, 16, 128, rng);
  fp8.scale = Tensor();
  EXPECT_THROW(fp8.validate("t"), Error);  // FP8 still needs its scale
  EXPECT_STREQ(weight_format_name(WeightFormat::BF16), "bf16");
}

TEST(ExpertGemm, SwigluClampsAndStandaloneOp) {
  Tensor gu = Tensor::empty({1, 6}, DType::BF16), out = Tensor::empty({1, 3}, DType::BF16);
  const float v[6] = {20.f, -3.f, 1.f, 50.f, 2.f, -40.f};
  for (int i = 0; i < 6; ++i) gu.data<uint16_t>()[i] = f32_to_bf16_bits(v[i]);
  swiglu(gu, out, 10.f);
  EXPECT_NEAR(bf(out, 0), silu_ref(10.0) * 10.0, 0.1);   // gate clamped to 10, up to 10
  EXPECT_NEAR(bf(out, 1), silu_ref(-3.0) * 2.0, 1e-2);
  EXPECT_NEAR(bf(out, 2), silu_ref(1.0) * -10.0, 0.05);  // up clamped to -10
  swiglu(gu, out, 0.f);
  EXPECT_NEAR(bf(out, 0), silu_ref(20.0) * 50.0, 8.0);    // no clamp
}

// The automatic rule: 64-row tiles from 32 rows per expert (only on 64-aligned segments), the
// GEMV kernel (tactic 9) for grouped MXFP4 calls with <= kExpertGemmGemvMaxRowsPerExpert rows
// per expert (unless DSA_MOE_GEMV=0), the decode stream kernel above that (FP8 with a wider CTA
// at T = 1), the 16-row tile for BF16; dense calls never take the GEMV by default; explicit
// tactics pass through.
TEST(ExpertGemm, AutoTacticRule) {
  const char* env = std::getenv("DSA_MOE_GEMV");
  const bool gemv = !(env && std::string(env) == "0") && kExpertGemmGemvMaxRowsPerExpert > 0;
  ExpertGemmParams p;
  for (WeightFormat f : {WeightFormat::MXFP4, WeightFormat::FP8Block}) {
    const bool mx = f == WeightFormat::MXFP4;
    p.rows_per_expert_hint = 6.0 / 256;  // T = 1, top-6 of 256
    EXPECT_EQ(resolve_expert_gemm_tactic(f, p, 384, 256, true), gemv && mx ? 9 : (mx ? 5 : 6));
    p.rows_per_expert_hint = kExpertGemmGemvMaxRowsPerExpert;  // the bound is inclusive
    EXPECT_EQ(resolve_expert_gemm_tactic(f, p, 384, 256, true), gemv && mx ? 9 : (mx ? 5 : 3));
    p.rows_per_expert_hint = 0.3;
    EXPECT_EQ(resolve_expert_gemm_tactic(f, p, 384, 256, true), mx ? 5 : 3);
    p.rows_per_expert_hint = 0;
    // Dense decode: not the GEMV; FP8 the k-split stream form, 128-row CTAs for long rows.
    EXPECT_EQ(resolve_expert_gemm_tactic(f, p, 1, 1, false), mx ? 5 : 4);
    EXPECT_EQ(resolve_expert_gemm_tactic(f, p, 8, 1, false, 4096), mx ? 5 : 4);
    EXPECT_EQ(resolve_expert_gemm_tactic(f, p, 1, 1, false, 8192), mx ? 5 : 6);
    EXPECT_EQ(resolve_expert_gemm_tactic(f, p, 2, 1, false, 8192), mx ? 5 : 4);
    EXPECT_EQ(resolve_expert_gemm_tactic(f, p, 8, 1, false, 16384), mx ? 5 : 6);
    EXPECT_EQ(resolve_expert_gemm_tactic(f, p, 9, 1, false, 16384), mx ? 5 : 3);
    p.rows_per_expert_hint = 32.0 * 6 / 256;
    EXPECT_EQ(resolve_expert_gemm_tactic(f, p, 1, 256, true), mx ? 5 : 3);
    p.rows_per_expert_hint = 128.0 * 6 / 256;
    EXPECT_EQ(resolve_expert_gemm_tactic(f, p, 1, 256, true), mx ? 5 : 3);
    p.rows_per_expert_hint = 4096.0 * 6 / 256;
    EXPECT_EQ(resolve_expert_gemm_tactic(f, p, 1, 256, true), 1);
    p.m_alignment = 16;
    EXPECT_EQ(resolve_expert_gemm_tactic(f, p, 1, 256, true), 0);  // 64-row tiles need 64-aligned segments
    p.m_alignment = 64;
    p.rows_per_expert_hint = 0;  // dense: rows are the rows per expert
    EXPECT_EQ(resolve_expert_gemm_tactic(f, p, 7, 1, false), mx ? 5 : 4);  // <= 8 dense rows: the decode linear rule
    EXPECT_EQ(resolve_expert_gemm_tactic(f, p, 500, 1, false), 1);
  }
  p.rows_per_expert_hint = 6.0 / 256;
  EXPECT_EQ(resolve_expert_gemm_tactic(WeightFormat::BF16, p, 384, 256, true), 0);
  for (int t = 0; t < kExpertGemmTactics; ++t) {
    p.tactic = t;
    EXPECT_EQ(resolve_expert_gemm_tactic(WeightFormat::MXFP4, p, 384, 256, true), t);
  }
  Rng rng;
  ExpertWeights w = random_mxfp4(2, 16, 128, rng);
  Tensor a = random_bf16({4, 128}, rng), out = Tensor::empty({4, 16}, DType::BF16);
  Tensor m = Tensor::zeros({4}, DType::I32);
  p = ExpertGemmParams{};
  p.tactic = kExpertGemmTactics;
  EXPECT_THROW(expert_gemm(a, Tensor(), m, w, out, p), Error);
}

TEST(ExpertGemm, ValidateRejectsBadShapes) {
  Rng rng;
  ExpertWeights w = random_mxfp4(2, 16, 128, rng);
  Tensor a = random_bf16({4, 96}, rng), out = Tensor::empty({4, 16}, DType::BF16);
  Tensor m = Tensor::zeros({4}, DType::I32);
  EXPECT_THROW(expert_gemm(a, Tensor(), m, w, out), Error);  // K mismatch
  Tensor a2 = random_bf16({4, 128}, rng);
  EXPECT_THROW(expert_gemm(a2, Tensor(), Tensor(), w, out), Error);  // dense needs one expert
  ExpertGemmParams p;
  p.m_alignment = 24;
  EXPECT_THROW(expert_gemm(a2, Tensor(), m, w, out, p), Error);
}

// The split-K rule on an H200-sized device (132 SMs): the narrow decode linears of the profile are
// split into whole-chunk slices, wide ones and grouped calls are not, forced counts are honoured,
// and every plan covers K exactly once with non-empty slices.
TEST(ExpertGemm, SplitKRule) {
  const WeightFormat F = WeightFormat::FP8Block;
  auto sp = [&](int t, int64_t rows, int64_t N, int64_t K, bool sw = false, int req = -1) {
    return expert_gemm_split(F, t, rows, N, K, sw, 132, req);
  };
  auto is = [](ExpertGemmSplit s, int splits, int chunks) { return s.splits == splits && s.chunks == chunks; };
  // T = 1, stream kernel (tactic 3: 64 weight rows per CTA)
  EXPECT_TRUE(is(sp(3, 1, 2048, 6144), 8, 6));     // GLM q_a: 32 CTAs -> 256
  EXPECT_TRUE(is(sp(3, 1, 576, 6144), 16, 3));     // kv_a: 9 -> 144
  EXPECT_TRUE(is(sp(3, 1, 128, 6144), 16, 3));     // indexer wk: 2 -> 32
  EXPECT_TRUE(is(sp(3, 1, 6144, 12288), 3, 32));   // dense MLP down: 96 -> 288
  EXPECT_TRUE(is(sp(3, 1, 1024, 4096), 16, 2));    // V4 wq_a
  EXPECT_TRUE(is(sp(3, 8, 2048, 6144), 8, 6));     // T = 8: one row tile still
  EXPECT_TRUE(is(sp(3, 1, 24576, 6144), 1, 48));   // wide: 384 CTAs, no split
  EXPECT_TRUE(is(sp(3, 1, 64 * 132, 6144), 1, 48));  // exactly one CTA per SM
  EXPECT_TRUE(is(sp(6, 1, 2048, 6144), 16, 3));    // tactic 6: 128 weight rows per CTA
  EXPECT_TRUE(is(sp(5, 1, 576, 6144), 12, 4));     // tactic 5 (stages of 2 chunks): even slices
  EXPECT_TRUE(is(sp(3, 1, 2048, 512), 2, 2));      // K = 512: slices of >= 2 chunks
  EXPECT_TRUE(is(sp(3, 1, 2048, 128), 1, 1));      // one chunk: nothing to split
  // T = 32 / 64, tile kernel (tactic 1: 32 x 128 dense tiles up to 32 rows, 64 x 64 above)
  EXPECT_TRUE(is(sp(1, 32, 6144, 12288), 6, 16));  // 48 CTAs -> 288
  EXPECT_TRUE(is(sp(1, 32, 2048, 6144), 12, 4));   // partial traffic cap K / (16 rows) = 12
  EXPECT_TRUE(is(sp(1, 64, 2048, 6144), 6, 8));
  EXPECT_TRUE(is(sp(1, 32, 24576, 6144), 1, 48));  // 192 CTAs
  EXPECT_TRUE(is(sp(1, 32, 2048, 512), 1, 4));     // K = 512 at T = 32: partials would outweigh weights
  EXPECT_TRUE(is(sp(1, 1000, 512, 6144), 1, 48));  // prefill
  // SwiGLU: columns are N/2, two weight rows each
  EXPECT_TRUE(is(sp(3, 1, 4096, 6144, true), 5, 10));  // 64 CTAs
  // Only FP8 splits automatically; forced counts apply to every format.
  EXPECT_EQ(expert_gemm_split(WeightFormat::MXFP4, 5, 1, 576, 6144, false, 132).splits, 1);
  EXPECT_EQ(expert_gemm_split(WeightFormat::BF16, 0, 1, 576, 6144, false, 132).splits, 1);
  EXPECT_TRUE(is(expert_gemm_split(WeightFormat::BF16, 0, 1, 576, 1024, false, 132, 3), 3, 3));
  EXPECT_TRUE(is(sp(3, 1, 576, 6144, false, 1), 1, 48));  // never
  EXPECT_TRUE(is(sp(3, 1, 576, 512, false, 100), 4, 1));  // at most one slice per chunk
  EXPECT_TRUE(is(sp(3, 1, 576, 1152, false, 4), 3, 3));   // 9 chunks over 4: slices of 3
  EXPECT_TRUE(is(sp(5, 1, 576, 1024, false, 3), 2, 4));   // KCH = 2: slices of an even count
  for (int t = 0; t < kExpertGemmTactics; ++t)
    for (int64_t rows : {1, 3, 8, 17, 32, 33, 64, 200})
      for (int64_t N : {16, 128, 576, 2112, 6144})
        for (int64_t K : {128, 512, 1152, 6144, 12288})
          for (int req : {-1, 2, 7}) {
            const ExpertGemmSplit s = sp(t, rows, N, K, false, req);
            const int nk = static_cast<int>(K / 128);
            ASSERT_GE(s.splits, 1);
            ASSERT_LE(s.splits, std::max(16, req));
            ASSERT_GE(static_cast<int64_t>(s.splits) * s.chunks, nk) << t << " " << rows << " " << N << " " << K;
            ASSERT_LT(static_cast<int64_t>(s.splits - 1) * s.chunks, nk) << t << " " << rows << " " << N << " " << K;
          }
  // What a call plans: nothing on the CPU or for grouped calls.
  Rng rng;
  ExpertWeights w = random_fp8(1, 576, 6144, rng);
  EXPECT_EQ(expert_gemm_planned_split(w, 1, false, ExpertGemmParams{}, Device::cpu()).splits, 1);
  EXPECT_EQ(expert_gemm_planned_split(w, 1, true, ExpertGemmParams{}, Device::cuda()).splits, 1);
}

// Dense calls write f32 outputs (the same sums as bf16, unrounded); k_splits is checked.
TEST(ExpertGemm, DenseF32OutAndSplitValidation) {
  Rng rng;
  for (int fmt : {0, 1, 2, 3})
    for (bool sw : {false, true}) {
      const int64_t T = 3, N = 48, K = 256, cols = sw ? N / 2 : N;
      ExpertWeights w = random_experts(fmt, 1, N, K, rng);
      Tensor x = random_bf16({T, K}, rng);
      ExpertGemmParams p;
      p.fuse_swiglu = sw;
      Tensor b = Tensor::empty({T, cols}, DType::BF16), f = Tensor::empty({T, cols}, DType::F32);
      poison(f);
      expert_gemm(x, Tensor(), Tensor(), w, b, p);
      expert_gemm(x, Tensor(), Tensor(), w, f, p);
      for (int64_t i = 0; i < T * cols; ++i) {
        ASSERT_EQ(f32_to_bf16_bits(f.data<float>()[i]), b.data<uint16_t>()[i]) << "fmt=" << fmt << " i=" << i;
      }
    }
  ExpertWeights w = random_fp8(2, 16, 128, rng);
  Tensor a = random_bf16({4, 128}, rng), m = Tensor::zeros({4}, DType::I32);
  Tensor outf = Tensor::empty({4, 16}, DType::F32), outb = Tensor::empty({4, 16}, DType::BF16);
  EXPECT_THROW(expert_gemm(a, Tensor(), m, w, outf), Error);  // f32 out is for dense calls
  ExpertGemmParams p;
  p.k_splits = 2;
  EXPECT_THROW(expert_gemm(a, Tensor(), m, w, outb, p), Error);  // split-K is for dense calls
  p.k_splits = 0;
  EXPECT_THROW(expert_gemm(a, Tensor(), m, w, outb, p), Error);
  p.k_splits = 1;
  EXPECT_NO_THROW(expert_gemm(a, Tensor(), m, w, outb, p));
}

TEST(ExpertGemmCuda, MatchesCpuAllFormatsTilesAndShapes) {
  DSA_REQUIRE_CUDA();
  Rng rng;
  const Device d = Device::cuda();
  for (int64_t T : {1, 7, 64, 1000})
    for (int mode : {0, 1, 2})
      for (int fmt : {0, 1, 2, 3}) {
        if (T == 1000 && mode != 0 && fmt >= 2) continue;  // keep the CPU reference time bounded
        // N: not a multiple of any tile width; K: 3, 4 or 8 chunks of 128 (stages of 1, 2 or 4
        // chunks, and the fallback of the 2-chunk stages to 1)
        const int64_t k = 4, E = 16, K = mode == 0 ? 1024 : (mode == 1 ? 384 : 512), N = 208;
        ExpertWeights w = random_experts(fmt, E, N, K, rng, true);
        ExpertWeights wd = to_device(w, d);
        Case c = make_case(T, k, E, K, mode, 64, rng);
        Tensor mi = c.layout.m_indices.to(d), src = c.layout.src_token.to(d), xd = c.x.to(d);
        for (bool sw : {false, true}) {
          ExpertGemmParams p;
          p.fuse_swiglu = sw;
          p.swiglu_limit = sw ? 10.f : 0.f;
          const int64_t cols = sw ? N / 2 : N;
          Tensor want = Tensor::zeros({c.layout.rows_cap, cols}, DType::BF16);  // padding rows: 0 (for the rms)
          expert_gemm(c.x, c.layout.src_token, c.layout.m_indices, w, want, p);
          std::vector<int64_t> valid;
          for (int64_t r = 0; r < c.layout.rows_cap; ++r)
            if (c.layout.m_indices.data<int32_t>()[r] >= 0) valid.push_back(r);
          const double atol = 1e-2 * rms_bf16(want) + 1e-6;
          for (int tactic = 0; tactic < kExpertGemmTactics; ++tactic) {
            p.tactic = tactic;
            Tensor got = Tensor::empty({c.layout.rows_cap, cols}, DType::BF16, d);
            poison(got);
            expert_gemm(xd, src, mi, wd, got, p);
            Tensor gh = got.to(Device::cpu());
            const std::string what = "T=" + std::to_string(T) + " mode=" + std::to_string(mode) + " fmt=" +
                                     std::to_string(fmt) + " swiglu=" + std::to_string(sw) + " tactic=" + std::to_string(tactic);
            ASSERT_EQ(compare_bf16(gh, want, 1e-2, atol, what, &valid), 0) << what;
            for (int64_t r = 0; r < c.layout.rows_cap; ++r)
              if (c.layout.m_indices.data<int32_t>()[r] < 0) {
                ASSERT_EQ(gh.data<uint16_t>()[r * cols], 0xFFFF) << what << ": padding row " << r << " written";
              }
          }
        }
      }
}

// Decode shapes for the GEMV tactics (and every other tactic): T = 1, 2, 3 tokens (one row on
// most used experts: 7 of the 8 token columns of a tile absent), V4-Flash-like gate/up (K = 4096,
// N = 2 x 2048, SwiGLU) and down (K = 2048, N = 4096) projections, N that is not a multiple of the
// 64-row CTA (4104; SwiGLU 2 x 1032), 16- and 64-aligned segments, gathered rows with
// out-of-range sources (computed as zero rows), MXFP4 and FP8 with fp32 and UE8M0 scales,
// poisoned outputs (padding rows must stay unwritten).
TEST(ExpertGemmCuda, DecodeShapesEveryTactic) {
  DSA_REQUIRE_CUDA();
  Rng rng;
  const Device d = Device::cuda();
  struct Shape {
    int64_t N, K;
    bool swiglu;
  };
  const Shape shapes[] = {{4096, 4096, true}, {4096, 2048, false}, {4104, 2048, false}, {2064, 1024, true}};
  for (int fmt : {0, 1, 2})
    for (const Shape& sh : shapes) {
      const int64_t E = 4, k = 2;
      ExpertWeights w = random_experts(fmt, E, sh.N, sh.K, rng);
      ExpertWeights wd = to_device(w, d);
      for (int64_t T : {1, 2, 3}) {
        const int64_t align = T == 2 ? 16 : 64;
        Case c = make_case(T, k, E, sh.K, 0, align, rng);
        Tensor a_rows = Tensor::empty(c.layout.src_token.shape(), DType::I32);
        std::memcpy(a_rows.raw(), c.layout.src_token.contiguous().raw(), a_rows.nbytes());
        if (T == 3) {  // one gathered source out of range on each side
          int bad = 0;
          for (int64_t r = 0; r < a_rows.numel() && bad < 2; ++r)
            if (c.layout.m_indices.data<int32_t>()[r] >= 0) a_rows.data<int32_t>()[r] = bad++ ? -1 : static_cast<int32_t>(T);
        }
        Tensor mi = c.layout.m_indices.to(d), src = a_rows.to(d), xd = c.x.to(d);
        std::vector<int64_t> valid;
        for (int64_t r = 0; r < c.layout.rows_cap; ++r)
          if (c.layout.m_indices.data<int32_t>()[r] >= 0) valid.push_back(r);
        ExpertGemmParams p;
        p.fuse_swiglu = sh.swiglu;
        p.swiglu_limit = sh.swiglu ? 10.f : 0.f;
        p.m_alignment = align;
        const int64_t cols = sh.swiglu ? sh.N / 2 : sh.N;
        Tensor want = Tensor::zeros({c.layout.rows_cap, cols}, DType::BF16);
        expert_gemm(c.x, a_rows, c.layout.m_indices, w, want, p);
        const double atol = 1e-2 * rms_bf16(want) + 1e-6;
        for (int tactic = -1; tactic < kExpertGemmTactics; ++tactic) {
          if (tactic == 1 && align % 64 != 0) continue;  // 64-row tiles need 64-aligned segments
          p.tactic = tactic;
          Tensor got = Tensor::empty({c.layout.rows_cap, cols}, DType::BF16, d);
          poison(got);
          expert_gemm(xd, src, mi, wd, got, p);
          Tensor gh = got.to(Device::cpu());
          const std::string what = "fmt=" + std::to_string(fmt) + " N=" + std::to_string(sh.N) + " K=" + std::to_string(sh.K) +
                                   " T=" + std::to_string(T) + " tactic=" + std::to_string(tactic);
          ASSERT_EQ(compare_bf16(gh, want, 1e-2, atol, what, &valid), 0) << what;
          for (int64_t r = 0; r < c.layout.rows_cap; ++r) {
            if (c.layout.m_indices.data<int32_t>()[r] >= 0) continue;
            for (int64_t j = 0; j < cols; j += 97) {
              ASSERT_EQ(gh.data<uint16_t>()[r * cols + j], 0xFFFF) << what << ": padding row " << r << " written";
            }
          }
        }
      }
    }
}

// The GEMV tactics on small awkward cases (small enough for compute-sanitizer memcheck, see
// scripts/gpu/moe-check.sh): odd expert counts, T = 1 and 9, K of 3 chunks (an odd chunk count
// split over the k warps), N / N/2 not a multiple of the 64-row CTA, segments aligned to 16 and
// 64 (and a caller alignment larger than the layout's: segments of several experts), gathered
// rows with out-of-range sources, MXFP4 (extreme scales: the two-multiplier path) and FP8.
TEST(ExpertGemmCuda, GemvSmallAwkwardLayouts) {
  DSA_REQUIRE_CUDA();
  Rng rng;
  const Device d = Device::cuda();
  for (int fmt : {0, 1, 2})
    for (int64_t E : {1, 5})
      for (int64_t T : {1, 9})
        for (int64_t align : {16, 64}) {
          const int64_t k = E == 1 ? 1 : 2, K = 384, N = 80;
          ExpertWeights w = random_experts(fmt, E, N, K, rng, true);
          ExpertWeights wd = to_device(w, d);
          Case c = make_case(T, k, E, K, E == 5 ? static_cast<int>(T % 3) : 0, align, rng);
          const GatherRows gr = gather_rows_with_holes(c, T, 5);
          const Tensor& a_rows = gr.a_rows;
          const std::vector<int64_t>& valid = gr.valid;
          Tensor mi = c.layout.m_indices.to(d), src = a_rows.to(d), xd = c.x.to(d);
          for (bool sw : {false, true}) {
            ExpertGemmParams p;
            p.fuse_swiglu = sw;
            p.swiglu_limit = sw ? 1.f : 0.f;
            const int64_t cols = sw ? N / 2 : N;
            Tensor want = Tensor::zeros({c.layout.rows_cap, cols}, DType::BF16);
            expert_gemm(c.x, a_rows, c.layout.m_indices, w, want, p);
            const double atol = 1e-2 * rms_bf16(want) + 1e-6;
            for (int64_t m_align : {align, int64_t{128}})
              for (int tactic : {9, 10}) {
                p.tactic = tactic;
                p.m_alignment = m_align;
                Tensor got = Tensor::empty({c.layout.rows_cap, cols}, DType::BF16, d);
                poison(got);
                expert_gemm(xd, src, mi, wd, got, p);
                Tensor gh = got.to(Device::cpu());
                const std::string what = "fmt=" + std::to_string(fmt) + " E=" + std::to_string(E) + " T=" + std::to_string(T) +
                                         " align=" + std::to_string(align) + " m_alignment=" + std::to_string(m_align) +
                                         " swiglu=" + std::to_string(sw) + " tactic=" + std::to_string(tactic);
                ASSERT_EQ(compare_bf16(gh, want, 1e-2, atol, what, &valid), 0) << what;
                for (int64_t r = 0; r < c.layout.rows_cap; ++r) {
                  if (c.layout.m_indices.data<int32_t>()[r] >= 0) continue;
                  for (int64_t j = 0; j < cols; ++j) {
                    ASSERT_EQ(gh.data<uint16_t>()[r * cols + j], 0xFFFF) << what << ": padding row " << r << " written";
                  }
                }
              }
          }
        }
}

TEST(ExpertGemmCuda, DenseModeMatchesCpu) {
  DSA_REQUIRE_CUDA();
  Rng rng;
  const Device d = Device::cuda();
  for (int64_t T : {1, 7, 64, 333})
    for (int fmt : {0, 1, 2, 3}) {
      const int64_t K = 512, N = 136;
      ExpertWeights w = random_experts(fmt, 1, N, K, rng);
      Tensor x = random_bf16({T, K}, rng);
      Tensor want = Tensor::empty({T, N}, DType::BF16);
      expert_gemm(x, Tensor(), Tensor(), w, want);
      for (int tactic = 0; tactic < kExpertGemmTactics; ++tactic) {
        ExpertGemmParams p;
        p.tactic = tactic;
        Tensor got = Tensor::empty({T, N}, DType::BF16, d);
        poison(got);
        expert_gemm(x.to(d), Tensor(), Tensor(), to_device(w, d), got, p);
        ASSERT_EQ(compare_bf16(got.to(Device::cpu()), want, 1e-2, 1e-2 * rms_bf16(want), "dense"), 0)
            << "T=" << T << " fmt=" << fmt << " tactic=" << tactic;
      }
    }
}

// BF16 weights on the GPU against the CPU op on awkward layouts: odd expert counts (1, 3, 5),
// T = 1, padding rows (-1), gathered rows (including out-of-range sources: zero rows), one and
// three K chunks, N not a multiple of the tile width, every tactic, SwiGLU fused or not.
TEST(ExpertGemmCuda, Bf16MatchesCpuAwkwardLayouts) {
  DSA_REQUIRE_CUDA();
  Rng rng;
  const Device d = Device::cuda();
  for (int64_t E : {1, 3, 5})
    for (int64_t T : {1, 9, 130})
      for (int64_t K : {128, 384}) {
        const int64_t k = E == 1 ? 1 : 2, N = 80;  // N/2 = 40: partial 32-column SwiGLU tiles
        ExpertWeights w = random_bf16_experts(E, N, K, rng);
        ExpertWeights wd = to_device(w, d);
        Case c = make_case(T, k, E, K, E >= 3 ? static_cast<int>(T % 3) : 0, 64, rng);
        const GatherRows gr = gather_rows_with_holes(c, T, 7);
        const Tensor& a_rows = gr.a_rows;
        const std::vector<int64_t>& valid = gr.valid;
        Tensor mi = c.layout.m_indices.to(d), src = a_rows.to(d), xd = c.x.to(d);
        for (bool sw : {false, true}) {
          ExpertGemmParams p;
          p.fuse_swiglu = sw;
          p.swiglu_limit = sw ? 1.f : 0.f;
          const int64_t cols = sw ? N / 2 : N;
          Tensor want = Tensor::zeros({c.layout.rows_cap, cols}, DType::BF16);
          expert_gemm(c.x, a_rows, c.layout.m_indices, w, want, p);
          const double atol = 1e-2 * rms_bf16(want) + 1e-6;
          for (int tactic = -1; tactic < kExpertGemmTactics; ++tactic) {
            p.tactic = tactic;
            Tensor got = Tensor::empty({c.layout.rows_cap, cols}, DType::BF16, d);
            poison(got);
            expert_gemm(xd, src, mi, wd, got, p);
            Tensor gh = got.to(Device::cpu());
            const std::string what = "E=" + std::to_string(E) + " T=" + std::to_string(T) + " K=" + std::to_string(K) +
                                     " swiglu=" + std::to_string(sw) + " tactic=" + std::to_string(tactic);
            ASSERT_EQ(compare_bf16(gh, want, 1e-2, atol, what, &valid), 0) << what;
            for (int64_t r = 0; r < c.layout.rows_cap; ++r) {
              if (c.layout.m_indices.data<int32_t>()[r] >= 0) continue;
              for (int64_t j = 0; j < cols; ++j) {
                ASSERT_EQ(gh.data<uint16_t>()[r * cols + j], 0xFFFF) << what << ": padding row " << r << " written";
              }
            }
          }
        }
      }
}

TEST(ExpertGemmCuda, SwigluOpMatchesCpu) {
  DSA_REQUIRE_CUDA();
  Rng rng;
  Tensor gu = random_bf16({37, 2 * 72}, rng, 8.f);
  Tensor want = Tensor::empty({37, 72}, DType::BF16), got = Tensor::empty({37, 72}, DType::BF16, Device::cuda());
  poison(got);
  swiglu(gu, want, 10.f);
  swiglu(gu.to(Device::cuda()), got, 10.f);
  ASSERT_EQ(compare_bf16(got.to(Device::cpu()), want, 1e-2, 1e-3, "swiglu"), 0);
}

// FP8 block scales as UE8M0 bytes are read by the kernels directly (no widening pass): for the
// same power-of-two scales the result must equal, bit for bit, the run with fp32 scales, for
// every tactic, including exponents far from 127 (2^-27 .. 2^13), SwiGLU fused or not.
TEST(ExpertGemmCuda, Fp8Ue8m0ScalesEqualFp32Scales) {
  DSA_REQUIRE_CUDA();
  Rng rng;
  const Device d = Device::cuda();
  const int64_t T = 9, k = 3, E = 6, K = 640, N = 272;
  ExpertWeights wu = random_fp8(E, N, K, rng, /*ue8m0=*/true);
  for (int64_t i = 0; i < wu.scale.numel(); i += 7) wu.scale.data<uint8_t>()[i] = static_cast<uint8_t>(rng.randint(100, 140));
  ExpertWeights wf = wu;
  wf.scale = Tensor::empty(wu.scale.shape(), DType::F32);
  for (int64_t i = 0; i < wu.scale.numel(); ++i) wf.scale.data<float>()[i] = ue8m0_to_f32(wu.scale.data<uint8_t>()[i]);
  Case c = make_case(T, k, E, K, 0, 64, rng);
  Tensor mi = c.layout.m_indices.to(d), src = c.layout.src_token.to(d), xd = c.x.to(d);
  ExpertWeights wud = to_device(wu, d), wfd = to_device(wf, d);
  for (bool sw : {false, true}) {
    ExpertGemmParams p;
    p.fuse_swiglu = sw;
    const int64_t cols = sw ? N / 2 : N;
    Tensor want = Tensor::zeros({c.layout.rows_cap, cols}, DType::BF16);
    expert_gemm(c.x, c.layout.src_token, c.layout.m_indices, wf, want, p);
    std::vector<int64_t> valid;
    for (int64_t r = 0; r < c.layout.rows_cap; ++r)
      if (c.layout.m_indices.data<int32_t>()[r] >= 0) valid.push_back(r);
    for (int tactic = 0; tactic < kExpertGemmTactics; ++tactic) {
      p.tactic = tactic;
      Tensor gu = Tensor::empty({c.layout.rows_cap, cols}, DType::BF16, d);
      Tensor gf = Tensor::empty({c.layout.rows_cap, cols}, DType::BF16, d);
      poison(gu);
      poison(gf);
      expert_gemm(xd, src, mi, wud, gu, p);
      expert_gemm(xd, src, mi, wfd, gf, p);
      Tensor hu = gu.to(Device::cpu()), hf = gf.to(Device::cpu());
      const std::string what = "swiglu=" + std::to_string(sw) + " tactic=" + std::to_string(tactic);
      for (int64_t r : valid)
        for (int64_t j = 0; j < cols; ++j)
          ASSERT_EQ(hu.data<uint16_t>()[r * cols + j], hf.data<uint16_t>()[r * cols + j]) << what << " row " << r << " col " << j;
      ASSERT_EQ(compare_bf16(hu, want, 1e-2, 1e-2 * rms_bf16(want) + 1e-6, what, &valid), 0) << what;
    }
  }
  // Dense FP8 linear with UE8M0 scales (the DeepSeek-V4 FP8 linears' path), every tactic.
  ExpertWeights w1 = random_fp8(1, 200, 384, rng, true);
  Tensor x = random_bf16({5, 384}, rng), want = Tensor::empty({5, 200}, DType::BF16);
  expert_gemm(x, Tensor(), Tensor(), w1, want);
  for (int tactic = 0; tactic < kExpertGemmTactics; ++tactic) {
    ExpertGemmParams p;
    p.tactic = tactic;
    Tensor got = Tensor::empty({5, 200}, DType::BF16, d);
    poison(got);
    expert_gemm(x.to(d), Tensor(), Tensor(), to_device(w1, d), got, p);
    ASSERT_EQ(compare_bf16(got.to(Device::cpu()), want, 1e-2, 1e-2 * rms_bf16(want), "dense ue8m0"), 0) << tactic;
  }
}

// K beyond what the FP8 kernels' shared-memory scale table holds is a clear error, not a crash.
TEST(ExpertGemmCuda, Fp8HugeKIsAnError) {
  DSA_REQUIRE_CUDA();
  Rng rng;
  const Device d = Device::cuda();
  const int64_t K = 128 * 1200, N = 16;
  ExpertWeights w = random_fp8(1, N, K, rng);
  Tensor x = random_bf16({2, K}, rng);
  Tensor got = Tensor::empty({2, N}, DType::BF16, d);
  ExpertGemmParams p;
  p.tactic = 1;  // 32 x 128 tile: 72 KB of stages + 16 x 1200 x 4 bytes of scales > 99 KB
  p.k_splits = 1;  // unsplit: the whole K's scale table in one CTA
  EXPECT_THROW(expert_gemm(x.to(d), Tensor(), Tensor(), to_device(w, d), got, p), Error);
  // Split (automatic: 2 rows give one tile), each CTA holds only its slice's scales.
  p.k_splits = -1;
  ASSERT_GT(expert_gemm_planned_split(w, 2, false, p, d).splits, 1);
  Tensor want = Tensor::empty({2, N}, DType::BF16);
  expert_gemm(x, Tensor(), Tensor(), w, want);
  poison(got);
  expert_gemm(x.to(d), Tensor(), Tensor(), to_device(w, d), got, p);
  EXPECT_EQ(compare_bf16(got.to(Device::cpu()), want, 1e-2, 1e-2 * rms_bf16(want), "huge K split"), 0);
}

// Split-K on the GPU against the CPU op, for every format and tactic (forced slice counts, so the
// split also runs where the automatic rule would not split; 1 = the unsplit kernels, e.g. the
// 32 x 128 dense FP8 tile of tactic 1 at T <= 32, with f32 out): T = 1 (one row), 7 and 33 (tails of
// the 8-, 16-, 32- and 64-row tiles), K of 9 chunks (slices of unequal length, the KCH = 2 forms'
// fallback) and 8, SwiGLU or not, bf16 and f32 out, poisoned outputs. A repeated call gives the
// same bits (the slices are added in a fixed order). Bounds: bf16 out as the unsplit kernels
// (1e-2 relative + 1e-2 rms); f32 out 2e-3 relative + 2e-3 rms (fp32 sums of exact products in
// another order than the CPU's double sums).
TEST(ExpertGemmCuda, DenseSplitKEveryFormatAndTactic) {
  DSA_REQUIRE_CUDA();
  Rng rng;
  const Device d = Device::cuda();
  for (int fmt : {0, 1, 2, 3})
    for (int64_t K : {1152, 1024}) {
      const int64_t N = 208;
      ExpertWeights w = random_experts(fmt, 1, N, K, rng);
      ExpertWeights wd = to_device(w, d);
      for (int64_t T : {1, 7, 33}) {
        Tensor x = random_bf16({T, K}, rng), xd = x.to(d);
        for (bool sw : {false, true}) {
          const int64_t cols = sw ? N / 2 : N;
          ExpertGemmParams p;
          p.fuse_swiglu = sw;
          p.swiglu_limit = sw ? 10.f : 0.f;
          Tensor want = Tensor::empty({T, cols}, DType::F32);
          expert_gemm(x, Tensor(), Tensor(), w, want, p);
          const Tensor want_b = to_bf16_host(want);
          const double rms = rms_f32(want);
          for (int splits : {1, 2, 3, 5})
            for (int tactic = 0; tactic < kExpertGemmTactics; ++tactic) {
              p.tactic = tactic;
              p.k_splits = splits;
              const std::string what = "fmt=" + std::to_string(fmt) + " K=" + std::to_string(K) + " T=" + std::to_string(T) +
                                       " swiglu=" + std::to_string(sw) + " splits=" + std::to_string(splits) +
                                       " tactic=" + std::to_string(tactic);
              const ExpertGemmSplit plan = expert_gemm_planned_split(wd, T, false, p, d);
              ASSERT_LE(plan.splits, splits) << what;  // equal whole-chunk slices (KCH = 2: even)
              ASSERT_EQ(plan.splits > 1, splits > 1) << what;
              Tensor gb = Tensor::empty({T, cols}, DType::BF16, d), gf = Tensor::empty({T, cols}, DType::F32, d);
              poison(gb);
              poison(gf);
              expert_gemm(xd, Tensor(), Tensor(), wd, gb, p);
              expert_gemm(xd, Tensor(), Tensor(), wd, gf, p);
              Tensor hb = gb.to(Device::cpu()), hf = gf.to(Device::cpu());
              ASSERT_EQ(compare_bf16(hb, want_b, 1e-2, 1e-2 * rms + 1e-6, what + " bf16"), 0) << what;
              ASSERT_EQ(compare_f32(hf, want, 2e-3, 2e-3 * rms + 1e-6, what + " f32"), 0) << what;
              if (splits == 3 && tactic % 3 == 0) {  // same bits again
                Tensor g2 = Tensor::empty({T, cols}, DType::F32, d);
                poison(g2);
                expert_gemm(xd, Tensor(), Tensor(), wd, g2, p);
                Tensor h2 = g2.to(Device::cpu());
                ASSERT_EQ(std::memcmp(h2.raw(), hf.raw(), hf.nbytes()), 0) << what << ": not deterministic";
              }
            }
        }
      }
    }
}

// The automatic split of narrow dense FP8 calls is taken on this device, matches the CPU, and a
// warm call allocates nothing and makes the host wait for nothing (graph-capturable).
TEST(ExpertGemmCuda, DenseAutoSplitIsTakenAndWarmCallsAreQuiet) {
  DSA_REQUIRE_CUDA();
  Rng rng;
  const Device d = Device::cuda();
  const int sm = cuda_devices()[0].sm_count;
  for (bool ue : {false, true}) {
    const int64_t N = 576, K = 6144;  // 9 CTAs of 64 weight rows at T = 1
    ExpertWeights w = random_fp8(1, N, K, rng, ue);
    ExpertWeights wd = to_device(w, d);
    for (int64_t T : {1, 4}) {
      const ExpertGemmSplit s = expert_gemm_planned_split(wd, T, false, ExpertGemmParams{}, d);
      if (sm > 9) {
        EXPECT_GT(s.splits, 1) << "T=" << T << " on " << sm << " SMs";
      }
      Tensor x = random_bf16({T, K}, rng), xd = x.to(d);
      Tensor want = Tensor::empty({T, N}, DType::BF16);
      expert_gemm(x, Tensor(), Tensor(), w, want);
      Tensor a = Tensor::empty({T, N}, DType::BF16, d), b = Tensor::empty({T, N}, DType::BF16, d);
      poison(a);
      poison(b);
      expert_gemm(xd, Tensor(), Tensor(), wd, a);  // warm-up: sizes the workspace
      const auto before = cuda_memory::cache_stats(d.index);
      const auto waits = cuda_stream::host_waits();
      expert_gemm(xd, Tensor(), Tensor(), wd, b);
      const auto after = cuda_memory::cache_stats(d.index);
      EXPECT_EQ(after.device_allocs + after.reuses, before.device_allocs + before.reuses) << "T=" << T;
      EXPECT_EQ(cuda_stream::host_waits().total(), waits.total()) << "T=" << T;
      Tensor ha = a.to(Device::cpu()), hb = b.to(Device::cpu());
      ASSERT_EQ(compare_bf16(ha, want, 1e-2, 1e-2 * rms_bf16(want), "auto split"), 0) << "T=" << T << " ue8m0=" << ue;
      ASSERT_EQ(std::memcmp(ha.raw(), hb.raw(), ha.nbytes()), 0) << "T=" << T << ": not deterministic";
    }
  }
}
