#include <cmath>

#include "dsa/ops/norm/norm.h"
#include "dsa/ops/tensor/tensor_ops.h"
#include "common/op_helpers.h"

using namespace dsa;
using namespace dsa::ops;
using namespace dsa::test;

TEST(ModelopsNorm, RmsNormHandComputed) {
  Tensor x = f32_from({3.f, 4.f, 0.f, 0.f}, {2, 2});
  Tensor w = f32_from({1.f, 2.f}, {2});
  Tensor out = Tensor::empty({2, 2}, DType::F32);
  poison(out);
  rms_norm(x, w, out, NormParams{0.f});
  // row 0: mean(x^2) = 12.5 -> x / sqrt(12.5) * w; row 1 all zero with eps 0 -> 0 * inf = NaN is
  // avoided by giving eps > 0 below; here check row 0 only.
  EXPECT_NEAR(at(out, 0), 3.0 / std::sqrt(12.5), 1e-6);
  EXPECT_NEAR(at(out, 1), 2.0 * 4.0 / std::sqrt(12.5), 1e-6);
  rms_norm(x, w, out, NormParams{1e-6f});
  EXPECT_EQ(at(out, 2), 0.f);
  EXPECT_EQ(at(out, 3), 0.f);
  EXPECT_NEAR(at(out, 0), 3.0 / std::sqrt(12.5 + 1e-6), 1e-7);
}

TEST(ModelopsNorm, RmsNormUnweightedInPlaceOnStridedSlice) {
  Rng rng;
  Tensor full = random_f32({5, 576}, rng, 3.f);
  std::vector<float> before = values(full);
  Tensor head = full.slice(1, 0, 512);  // the latent part of a kv_a_proj_with_mqa output
  rms_norm(head, Tensor(), head, NormParams{0.f});
  std::vector<float> after = values(full);
  for (int r = 0; r < 5; ++r) {
    double ss = 0;
    for (int c = 0; c < 512; ++c) ss += double(after[r * 576 + c]) * after[r * 576 + c];
    EXPECT_NEAR(ss / 512, 1.0, 1e-5) << "row " << r;
    for (int c = 512; c < 576; ++c) ASSERT_EQ(after[r * 576 + c], before[r * 576 + c]) << "untouched tail";
    // direction is preserved: ratio of two elements unchanged
    EXPECT_NEAR(after[r * 576 + 1] / after[r * 576 + 0], before[r * 576 + 1] / before[r * 576 + 0], 1e-4);
  }
}

TEST(ModelopsNorm, PerHeadQNormIs3dRows) {
  // V4's q: [T][H][512] normalised per head = rows of the flattened view.
  Rng rng;
  Tensor q = random_bf16({3, 4, 512}, rng, 2.f);
  Tensor out = Tensor::empty({3, 4, 512}, DType::BF16);
  poison(out);
  rms_norm(q, Tensor(), out, NormParams{1e-6f});
  std::vector<float> v = values(out);
  for (int r = 0; r < 12; ++r) {
    double ss = 0;
    for (int c = 0; c < 512; ++c) ss += double(v[r * 512 + c]) * v[r * 512 + c];
    EXPECT_NEAR(ss / 512, 1.0, 1e-2) << "row " << r;  // bf16 rounding of the outputs
  }
}

TEST(ModelopsNorm, Bf16OutputIsRoundedF32Output) {
  Rng rng;
  Tensor x = random_bf16({7, 96}, rng);
  Tensor w = random_bf16({96}, rng);
  Tensor of = Tensor::empty({7, 96}, DType::F32), ob = Tensor::empty({7, 96}, DType::BF16);
  rms_norm(x, w, of, NormParams{1e-5f});
  rms_norm(x, w, ob, NormParams{1e-5f});
  for (int64_t i = 0; i < of.numel(); ++i) ASSERT_EQ(at(ob, i), round_to_bf16(at(of, i))) << i;
}

TEST(ModelopsNorm, LayerNormHandComputed) {
  Tensor x = f32_from({1.f, 2.f, 3.f, 4.f}, {1, 4});
  Tensor w = f32_from({1.f, 1.f, 2.f, 0.5f}, {4});
  Tensor b = f32_from({0.f, 1.f, 0.f, -1.f}, {4});
  Tensor out = Tensor::empty({1, 4}, DType::F32);
  poison(out);
  layer_norm(x, w, b, out, NormParams{1e-6f});
  const double inv = 1.0 / std::sqrt(1.25 + 1e-6);  // mean 2.5, biased variance 1.25
  EXPECT_NEAR(at(out, 0), -1.5 * inv, 1e-6);
  EXPECT_NEAR(at(out, 1), -0.5 * inv + 1, 1e-6);
  EXPECT_NEAR(at(out, 2), 0.5 * inv * 2, 1e-6);
  EXPECT_NEAR(at(out, 3), 1.5 * inv * 0.5 - 1, 1e-6);
}

TEST(ModelopsNorm, ValidationNamesTheProblem) {
  Tensor x = Tensor::zeros({2, 8}, DType::F32);
  Tensor out = Tensor::empty({2, 8}, DType::F32);
  Tensor bad_w = Tensor::zeros({7}, DType::F32);
  try {
    rms_norm(x, bad_w, out, {});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("weight"), std::string::npos) << e.what();
  }
  EXPECT_THROW(rms_norm(x, Tensor(), Tensor::empty({2, 7}, DType::F32), {}), Error);
  EXPECT_THROW(rms_norm(x, Tensor(), Tensor::empty({2, 8}, DType::I32), {}), Error);
  EXPECT_THROW(rms_norm(x, Tensor(), out, NormParams{-1.f}), Error);
  EXPECT_THROW(layer_norm(x, Tensor::zeros({8}, DType::F32), Tensor::zeros({9}, DType::F32), out, {}), Error);
  Tensor empty_rows = Tensor::empty({0, 8}, DType::F32);
  EXPECT_NO_THROW(rms_norm(empty_rows, Tensor(), empty_rows, {}));
}

// ---- CUDA vs CPU ------------------------------------------------------------------------------

namespace {
void norm_cuda_case(bool layer, DType xdt, DType odt, DType wdt, bool weighted, int64_t rows, int64_t cols,
                    int64_t row_stride, Rng& rng) {
  Tensor xfull = random_act({rows, row_stride}, xdt, rng, 2.f);
  Tensor x = xfull.slice(1, 0, cols);
  Tensor w = weighted ? random_act({cols}, wdt, rng) : Tensor();
  Tensor b = layer && weighted ? random_act({cols}, wdt, rng) : Tensor();
  Tensor ref = Tensor::empty({rows, cols}, odt);
  NormParams p{layer ? 1e-6f : 1e-5f};
  if (layer)
    layer_norm_cpu(x, w, b, ref, p);
  else
    rms_norm_cpu(x, w, ref, p);
  Tensor xd = xfull.to(Device::cuda()).slice(1, 0, cols);
  Tensor wd = w.defined() ? w.to(Device::cuda()) : Tensor();
  Tensor bd = b.defined() ? b.to(Device::cuda()) : Tensor();
  Tensor od = Tensor::empty({rows, cols}, odt, Device::cuda());
  poison(od);
  if (layer)
    layer_norm(xd, wd, bd, od, p);
  else
    rms_norm(xd, wd, od, p);
  const double tol = odt == DType::BF16 ? 8e-3 : 2e-5;  // one bf16 ulp of slack for rounding ties
  expect_close(od, ref, tol, tol,
               fmt::format("{} x={} out={} rows={} cols={}", layer ? "layer_norm" : "rms_norm", dtype_name(xdt),
                           dtype_name(odt), rows, cols));
}
}  // namespace

TEST(ModelopsNorm, CudaMatchesCpu) {
  DSA_REQUIRE_CUDA();
  Rng rng;
  for (bool layer : {false, true})
    for (DType xdt : {DType::F32, DType::BF16})
      for (DType odt : {DType::F32, DType::BF16}) {
        norm_cuda_case(layer, xdt, odt, DType::BF16, true, 37, 512, 576, rng);
        norm_cuda_case(layer, xdt, odt, DType::F32, true, 3, 4096, 4096, rng);
        norm_cuda_case(layer, xdt, odt, DType::F32, false, 129, 128, 128, rng);
        norm_cuda_case(layer, xdt, odt, DType::F32, true, 5, 1, 1, rng);
        norm_cuda_case(layer, xdt, odt, DType::F32, true, 2, 7168, 7169, rng);
      }
}

TEST(ModelopsNorm, CudaInPlace) {
  DSA_REQUIRE_CUDA();
  Rng rng;
  Tensor x = random_bf16({64, 8, 512}, rng);
  Tensor ref = Tensor::empty({64, 8, 512}, DType::BF16);
  rms_norm_cpu(x, Tensor(), ref, NormParams{1e-6f});
  Tensor xd = x.to(Device::cuda());
  rms_norm(xd, Tensor(), xd, NormParams{1e-6f});
  expect_close(xd, ref, 8e-3, 8e-3, "in-place per-head q norm");
}

// The register-resident kernel (rows <= 16384 columns, 1, 2, 4 or 8 groups of 4 per thread; vector
// accesses only when aligned) and the strided fallback (longer rows), at decode row counts, odd
// widths, a misaligned start (x begins one column into its buffer) and in place. Bounds as
// CudaMatchesCpu: 2e-5 for f32 out, one bf16 ulp for bf16 out.
TEST(ModelopsNorm, CudaRegisterAndStridedPathsMatchCpu) {
  DSA_REQUIRE_CUDA();
  Rng rng(11);
  for (int64_t rows : {1L, 3L, 32L})
    for (int64_t cols : {1L, 3L, 127L, 1024L, 1028L, 4096L, 4097L, 6144L, 8192L, 16384L, 16385L, 20001L})
      for (DType dt : {DType::F32, DType::BF16}) {
        if (rows == 32 && cols > 8192 && dt == DType::BF16) continue;  // enough of the big ones
        norm_cuda_case(false, dt, dt, DType::F32, true, rows, cols, cols, rng);
        norm_cuda_case(true, dt, DType::F32, DType::BF16, true, rows, cols, cols + 3, rng);
        // misaligned start: x is columns [1, cols+1) of a wider buffer -> scalar accesses
        Tensor xfull = random_act({rows, cols + 1}, dt, rng, 2.f);
        Tensor x = xfull.slice(1, 1, cols + 1);
        Tensor w = random_act({cols}, DType::F32, rng);
        Tensor ref = Tensor::empty({rows, cols}, dt);
        rms_norm_cpu(x, w, ref, NormParams{1e-6f});
        Tensor xd = xfull.to(Device::cuda()).slice(1, 1, cols + 1);
        Tensor od = Tensor::empty({rows, cols}, dt, Device::cuda());
        poison(od);
        rms_norm(xd, w.to(Device::cuda()), od, NormParams{1e-6f});
        const double tol = dt == DType::BF16 ? 8e-3 : 2e-5;
        expect_close(od, ref, tol, tol, fmt::format("rms_norm misaligned rows={} cols={}", rows, cols));
        // in place on the (aligned) contiguous tensor
        Tensor xc = random_act({rows, cols}, dt, rng, 2.f);
        rms_norm_cpu(xc, w, ref, NormParams{1e-6f});
        Tensor xi = xc.to(Device::cuda());
        rms_norm(xi, w.to(Device::cuda()), xi, NormParams{1e-6f});
        expect_close(xi, ref, tol, tol, fmt::format("rms_norm in place rows={} cols={}", rows, cols));
      }
}

// ---- add_rms_norm: the residual add fused with the norm after it ---------------------------

namespace {
// Bit-for-bit equality of two tensors' values (NaN never equals: poisoned, unwritten elements fail).
void expect_same_values(const Tensor& a, const Tensor& b, const std::string& what) {
  const std::vector<float> va = values(a), vb = values(b);
  ASSERT_EQ(va.size(), vb.size()) << what;
  for (size_t i = 0; i < va.size(); ++i)
    ASSERT_TRUE(va[i] == vb[i] && std::isfinite(va[i])) << what << ": element " << i << ": " << va[i] << " vs " << vb[i];
}
}  // namespace

TEST(ModelopsNorm, AddRmsNormCpuIsAddThenNorm) {
  for (uint64_t seed : {1u, 2u}) {
    Rng rng(seed);
    for (int64_t cols : {1L, 3L, 6144L})
      for (DType ddt : {DType::F32, DType::BF16}) {
        SCOPED_TRACE(fmt::format("seed {} cols {} delta {}", seed, cols, dtype_name(ddt)));
        Tensor x = random_f32({3, cols}, rng, 2.f), d = random_act({3, cols}, ddt, rng, 2.f);
        Tensor w = random_act({cols}, DType::BF16, rng);
        Tensor xs = Tensor::empty({3, cols}, DType::F32), os = Tensor::empty({3, cols}, DType::BF16), of = Tensor::empty({3, cols}, DType::BF16);
        xs.copy_from(x);
        poison(os);
        poison(of);
        float* a = xs.data<float>();
        for (int64_t i = 0; i < xs.numel(); ++i) a[i] += at(d, i);  // the unfused pair, by hand
        rms_norm_cpu(xs, w, os, NormParams{1e-5f});
        add_rms_norm(x, d, w, of, NormParams{1e-5f});
        expect_same_values(x, xs, "x");
        expect_same_values(of, os, "out");
      }
  }
  // Errors name the problem; an empty batch is fine.
  Tensor x = Tensor::zeros({2, 8}, DType::F32), d = Tensor::zeros({2, 8}, DType::BF16), o = Tensor::empty({2, 8}, DType::BF16);
  EXPECT_THROW(add_rms_norm(Tensor::zeros({2, 8}, DType::BF16), d, Tensor(), o, {}), Error);  // x not f32
  EXPECT_THROW(add_rms_norm(x, Tensor::zeros({2, 7}, DType::F32), Tensor(), o, {}), Error);
  EXPECT_THROW(add_rms_norm(x, Tensor::zeros({2, 8}, DType::I32), Tensor(), o, {}), Error);
  try {
    add_rms_norm(x, d, Tensor(), x, {});
    FAIL() << "expected an error for out == x";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("overlap"), std::string::npos) << e.what();
  }
  Tensor none = Tensor::empty({0, 8}, DType::F32);
  EXPECT_NO_THROW(add_rms_norm(none, Tensor::empty({0, 8}, DType::F32), Tensor(), Tensor::empty({0, 8}, DType::BF16), {}));
}

// On the GPU the fused kernel (both paths: register rows <= 16384 columns and the strided one)
// must give exactly what add_into + rms_norm give there (x and out), and x exactly the CPU's sums,
// out within the norm's bound of the CPU reference (2e-5 f32, one bf16 ulp).
TEST(ModelopsNorm, CudaAddRmsNormEqualsAddIntoThenRmsNorm) {
  DSA_REQUIRE_CUDA();
  const uint64_t seed = 23;
  Rng rng(seed);
  for (int64_t rows : {0L, 1L, 3L, 32L})
    for (int64_t cols : {1L, 3L, 127L, 1028L, 6144L, 7168L, 16384L, 16385L, 20001L})
      for (DType ddt : {DType::F32, DType::BF16})
        for (DType odt : {DType::BF16, DType::F32}) {
          if (odt == DType::F32 && ddt == DType::F32 && cols > 8192) continue;
          const std::string what = fmt::format("seed {} rows {} cols {} delta {} out {}", seed, rows, cols,
                                               dtype_name(ddt), dtype_name(odt));
          Tensor x = random_f32({rows, cols}, rng, 2.f), d = random_act({rows, cols}, ddt, rng, 2.f);
          Tensor w = random_act({cols}, DType::BF16, rng);
          const NormParams p{1e-5f};
          Tensor xc = Tensor::empty({rows, cols}, DType::F32), oc = Tensor::empty({rows, cols}, odt);
          xc.copy_from(x);
          add_rms_norm_cpu(xc, d, w, oc, p);
          Tensor dg = d.to(Device::cuda()), wg = w.to(Device::cuda());
          Tensor x1 = x.to(Device::cuda()), x2 = x.to(Device::cuda());
          Tensor o1 = Tensor::empty({rows, cols}, odt, Device::cuda()), o2 = Tensor::empty({rows, cols}, odt, Device::cuda());
          poison(o1);
          poison(o2);
          add_rms_norm(x1, dg, wg, o1, p);
          add_into(x2, dg);
          rms_norm(x2, wg, o2, p);
          expect_same_values(x1, x2, what + ": x, fused vs add_into");
          expect_same_values(o1, o2, what + ": out, fused vs add_into + rms_norm");
          expect_same_values(x1, xc, what + ": x vs the CPU sums");
          const double tol = odt == DType::BF16 ? 8e-3 : 2e-5;
          expect_close(o1, oc, tol, tol, what + ": out vs the CPU reference");
        }
}
