#include <cmath>

#include "dsa/ops/mhc/mhc.h"
#include "dsa/ops/mhc/mhc_math.h"
#include "common/op_helpers.h"

using namespace dsa;
using namespace dsa::ops;
using namespace dsa::test;

namespace {
struct PreOut {
  Tensor mix, y, post, comb;
  PreOut(int64_t T, int64_t d, int hc, DType ydt, Device dev = Device::cpu())
      : mix(Tensor::empty({T, (2 + hc) * hc}, DType::F32, dev)),
        y(Tensor::empty({T, d}, ydt, dev)),
        post(Tensor::empty({T, hc}, DType::F32, dev)),
        comb(Tensor::empty({T, hc, hc}, DType::F32, dev)) {
    poison(mix), poison(y), poison(post), poison(comb);
  }
};
}  // namespace

namespace {
// Largest |row sum - 1| and |column sum - 1| of a 4x4 comb.
std::pair<float, float> stochastic_error(const float* comb) {
  float re = 0, ce = 0;
  for (int i = 0; i < 4; ++i) {
    float rs = 0, cs = 0;
    for (int j = 0; j < 4; ++j) rs += comb[i * 4 + j], cs += comb[j * 4 + i];
    re = std::max(re, std::abs(rs - 1)), ce = std::max(ce, std::abs(cs - 1));
  }
  return {re, ce};
}
}  // namespace

TEST(ModelopsMhc, SinkhornIsDoublyStochastic) {
  Rng rng;
  for (int trial = 0; trial < 100; ++trial) {
    // moderate logits (|scale2 * mix| of a few units): 20 iterations converge
    float mix[24], scale[3] = {rng.uniform(0.1f, 3.f), rng.uniform(0.1f, 3.f), rng.uniform(0.1f, 1.f)}, base[24];
    for (int i = 0; i < 24; ++i) mix[i] = rng.normal(0, 1), base[i] = rng.normal(0, 1);
    float pre[4], post[4], comb[16];
    mhc_split_sinkhorn(mix, scale, base, 4, 20, 1e-6f, pre, post, comb);
    auto [re, ce] = stochastic_error(comb);
    EXPECT_LT(ce, 1e-5f);  // the last step normalises columns
    EXPECT_LT(re, 2e-2f);  // 20 iterations: rows within a few 1e-3 typically
    float many[16];
    mhc_split_sinkhorn(mix, scale, base, 4, 500, 1e-6f, pre, post, many);
    EXPECT_LT(stochastic_error(many).first, 1e-4f);  // converges with more iterations
    for (int i = 0; i < 4; ++i) {
      EXPECT_GT(pre[i], 0.f);
      EXPECT_LT(pre[i], 1.f + 2e-6f);
      EXPECT_GE(post[i], 0.f);
      EXPECT_LE(post[i], 2.f);
    }
    for (float c : comb) EXPECT_GE(c, 0.f);
    // peaked logits converge slower: 20 fixed iterations (the model's choice) leave row errors of
    // a few percent; more iterations shrink them.
    for (int i = 0; i < 24; ++i) mix[i] = rng.normal(0, 3);
    scale[2] = 8.f;
    mhc_split_sinkhorn(mix, scale, base, 4, 20, 1e-6f, pre, post, comb);
    const float re20 = stochastic_error(comb).first;
    mhc_split_sinkhorn(mix, scale, base, 4, 2000, 1e-6f, pre, post, comb);
    EXPECT_LE(stochastic_error(comb).first, re20 + 1e-6f);
  }
}

TEST(ModelopsMhc, SinkhornHandComputedOneIteration) {
  // iters = 1: softmax rows + eps, then one column normalisation only.
  float mix[24] = {}, base[24] = {}, scale[3] = {1, 1, 1};
  base[8 + 0 * 4 + 1] = std::log(3.f);  // row 0 logits (0, ln 3, 0, 0): softmax (1/6, 1/2, 1/6, 1/6)
  float pre[4], post[4], comb[16];
  mhc_split_sinkhorn(mix, scale, base, 4, 1, 0.f, pre, post, comb);
  // column 1 before normalisation: 1/2 + 3 * 1/4 = 5/4; other columns: 1/6 + 3/4 = 11/12.
  EXPECT_NEAR(comb[0 * 4 + 1], 0.5 / 1.25, 1e-6);
  EXPECT_NEAR(comb[1 * 4 + 1], 0.25 / 1.25, 1e-6);
  EXPECT_NEAR(comb[0 * 4 + 0], (1.0 / 6) / (11.0 / 12), 1e-6);
  EXPECT_NEAR(pre[0], 0.5, 1e-7);
  EXPECT_NEAR(post[3], 1.0, 1e-7);
}

TEST(ModelopsMhc, PreHandComputed) {
  // fn = 0, base = 0: pre = 0.5 + eps, post = 1, comb uniform 1/4; y = sum_i (0.5+eps) X_i.
  const int64_t T = 2, d = 3;
  Tensor X = f32_from({1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, -1, 0, 1, 2, 0, 0, 0, 0, 0, 0, 0, 0}, {T, 4, d});
  Tensor fn = Tensor::zeros({24, 12}, DType::F32), base = Tensor::zeros({24}, DType::F32);
  Tensor scale = f32_from({1, 1, 1}, {3});
  PreOut o(T, d, 4, DType::F32);
  mhc_pre(X, fn, base, scale, MhcParams{}, o.mix, o.y, o.post, o.comb);
  const double pre = 0.5 + 1e-6;
  EXPECT_NEAR(at(o.y, 0), pre * (1 + 4 + 7 + 10), 1e-5);
  EXPECT_NEAR(at(o.y, 2), pre * (3 + 6 + 9 + 12), 1e-5);
  EXPECT_NEAR(at(o.y, 3), pre * (-1 + 2), 1e-6);
  for (int i = 0; i < 8; ++i) EXPECT_NEAR(at(o.post, i), 1.0, 1e-7);
  for (int i = 0; i < 32; ++i) EXPECT_NEAR(at(o.comb, i), 0.25, 1e-5);
  for (int i = 0; i < 48; ++i) EXPECT_EQ(at(o.mix, i), 0.f);
}

TEST(ModelopsMhc, MixIsNormalisedDotProduct) {
  // One-hot fn rows pick single elements: mix[r] = x[k_r] * rsqrt(mean(x^2) + eps).
  Rng rng;
  const int64_t d = 5;
  Tensor X = random_f32({1, 4, d}, rng);
  Tensor fn = Tensor::zeros({24, 4 * d}, DType::F32);
  for (int r = 0; r < 24; ++r) fn.data<float>()[r * 4 * d + (r * 7) % (4 * d)] = 1.f + r;
  PreOut o(1, d, 4, DType::F32);
  mhc_pre(X, fn, Tensor::zeros({24}, DType::F32), f32_from({1, 1, 1}, {3}), MhcParams{}, o.mix, o.y, o.post, o.comb);
  double ss = 0;
  for (int k = 0; k < 4 * d; ++k) ss += double(at(X, k)) * at(X, k);
  const double rs = 1 / std::sqrt(ss / (4 * d) + 1e-6);
  for (int r = 0; r < 24; ++r) EXPECT_NEAR(at(o.mix, r), (1 + r) * at(X, (r * 7) % (4 * d)) * rs, 1e-5 * (1 + r)) << r;
}

TEST(ModelopsMhc, PostUsesFirstCombIndexAsInputStream) {
  // comb[i][j] weights input stream i into output stream j: a single 1 at [0][1] copies X_0 to X'_1.
  const int64_t d = 2;
  Tensor X = f32_from({1, 2, 3, 4, 5, 6, 7, 8}, {1, 4, d});
  Tensor f = f32_from({10, 20}, {1, d});
  Tensor post = f32_from({0, 0.5f, 0, 2}, {1, 4});
  Tensor comb = Tensor::zeros({1, 4, 4}, DType::F32);
  comb.data<float>()[0 * 4 + 1] = 1.f;
  comb.data<float>()[3 * 4 + 3] = 0.25f;
  Tensor out = Tensor::empty({1, 4, d}, DType::F32);
  poison(out);
  mhc_post(f, X, post, comb, out);
  std::vector<float> v = values(out);
  std::vector<float> want = {0, 0, 1 + 5, 2 + 10, 0, 0, 0.25f * 7 + 20, 0.25f * 8 + 40};
  for (int i = 0; i < 8; ++i) EXPECT_FLOAT_EQ(v[i], want[i]) << i;
  // in place gives the same
  mhc_post(f, X, post, comb, X);
  EXPECT_EQ(values(X), v);
}

TEST(ModelopsMhc, HeadHandComputed) {
  const int64_t d = 2;
  Tensor X = f32_from({1, 2, 3, 4, 5, 6, 7, 8}, {1, 4, d});
  Tensor fn = Tensor::zeros({4, 4 * d}, DType::F32);
  Tensor base = f32_from({0, 100, -100, 0}, {4});  // pre = 0.5, 1, 0, 0.5 (+ eps)
  Tensor mix = Tensor::empty({1, 4}, DType::F32), y = Tensor::empty({1, d}, DType::F32);
  poison(y);
  MhcParams p;
  p.hc_eps = 0.f;
  mhc_head(X, fn, base, f32_from({1}, {1}), p, mix, y);
  EXPECT_NEAR(at(y, 0), 0.5 * 1 + 3 + 0.5 * 7, 1e-5);
  EXPECT_NEAR(at(y, 1), 0.5 * 2 + 4 + 0.5 * 8, 1e-5);
}

TEST(ModelopsMhc, Validation) {
  Tensor X = Tensor::zeros({1, 4, 8}, DType::F32);
  PreOut o(1, 8, 4, DType::F32);
  Tensor base = Tensor::zeros({24}, DType::F32), scale = Tensor::zeros({3}, DType::F32);
  EXPECT_THROW(mhc_pre(X, Tensor::zeros({24, 31}, DType::F32), base, scale, {}, o.mix, o.y, o.post, o.comb), Error);
  EXPECT_THROW(mhc_pre(X, Tensor::zeros({24, 32}, DType::BF16), base, scale, {}, o.mix, o.y, o.post, o.comb), Error);
  MhcParams bad;
  bad.hc_mult = 3;
  EXPECT_THROW(mhc_pre(X, Tensor::zeros({24, 32}, DType::F32), base, scale, bad, o.mix, o.y, o.post, o.comb), Error);
  EXPECT_THROW(mhc_post(Tensor::zeros({1, 7}, DType::F32), X, o.post, o.comb, X), Error);
}

// ---- CUDA vs CPU ------------------------------------------------------------------------------

TEST(ModelopsMhc, CudaPreAndHeadMatchCpu) {
  DSA_REQUIRE_CUDA();
  Rng rng;
  for (auto [T, d, dt] : {std::tuple{1L, 4096L, DType::BF16}, std::tuple{7L, 4096L, DType::F32},
                          std::tuple{33L, 256L, DType::BF16}, std::tuple{2L, 7168L, DType::BF16},
                          std::tuple{3L, 5L, DType::F32}}) {
    MhcParams p;
    Tensor X = random_act({T, 4, d}, dt, rng);
    Tensor fn = random_f32({24, 4 * d}, rng, 0.02f), base = random_f32({24}, rng, 0.5f);
    Tensor scale = random_f32({3}, rng, 1.f);
    PreOut ref(T, d, 4, dt);
    mhc_pre_cpu(X, fn, base, scale, p, ref.mix, ref.y, ref.post, ref.comb);
    Device g = Device::cuda();
    PreOut out(T, d, 4, dt, g);
    mhc_pre(X.to(g), fn.to(g), base.to(g), scale.to(g), p, out.mix, out.y, out.post, out.comb);
    std::string what = fmt::format("mhc_pre T={} d={} {}", T, d, dtype_name(dt));
    expect_close(out.mix, ref.mix, 1e-4, 1e-4, what + " mix");
    expect_close(out.post, ref.post, 1e-5, 1e-4, what + " post");
    expect_close(out.comb, ref.comb, 1e-5, 1e-3, what + " comb");
    const double ytol = dt == DType::BF16 ? 8e-3 : 1e-4;
    expect_close(out.y, ref.y, ytol, ytol, what + " y");

    Tensor hfn = random_f32({4, 4 * d}, rng, 0.02f), hbase = random_f32({4}, rng), hscale = random_f32({1}, rng);
    Tensor hmix = Tensor::empty({T, 4}, DType::F32), hy = Tensor::empty({T, d}, dt);
    mhc_head_cpu(X, hfn, hbase, hscale, p, hmix, hy);
    Tensor dmix = Tensor::empty({T, 4}, DType::F32, g), dy = Tensor::empty({T, d}, dt, g);
    poison(dmix), poison(dy);
    mhc_head(X.to(g), hfn.to(g), hbase.to(g), hscale.to(g), p, dmix, dy);
    expect_close(dmix, hmix, 1e-4, 1e-4, what + " head mix");
    expect_close(dy, hy, ytol, ytol, what + " head y");
  }
}

TEST(ModelopsMhc, CudaPostMatchesCpu) {
  DSA_REQUIRE_CUDA();
  Rng rng;
  for (auto [T, d, dt] : {std::tuple{1L, 4096L, DType::BF16}, std::tuple{9L, 7168L, DType::BF16},
                          std::tuple{4L, 33L, DType::F32}}) {
    Tensor X = random_act({T, 4, d}, dt, rng), f = random_act({T, d}, dt, rng);
    Tensor post = random_f32({T, 4}, rng), comb = random_f32({T, 4, 4}, rng);
    Tensor ref = Tensor::empty({T, 4, d}, dt);
    mhc_post_cpu(f, X, post, comb, ref);
    Device g = Device::cuda();
    Tensor out = Tensor::empty({T, 4, d}, dt, g);
    poison(out);
    Tensor Xd = X.to(g);
    mhc_post(f.to(g), Xd, post.to(g), comb.to(g), out);
    const double tol = dt == DType::BF16 ? 8e-3 : 1e-5;
    expect_close(out, ref, tol, tol, fmt::format("mhc_post T={} d={}", T, d));
    mhc_post(f.to(g), Xd, post.to(g), comb.to(g), Xd);  // in place
    expect_close(Xd, ref, tol, tol, "mhc_post in place");
  }
}

// ---- split-K mix, register Sinkhorn, fused pre + RMSNorm ---------------------------------------

namespace {
MhcParams params_hc(int hc) {
  MhcParams p;
  p.hc_mult = hc;
  return p;
}
}  // namespace

TEST(ModelopsMhc, PreNormCpuIsPreThenRmsNorm) {
  Rng rng(3);
  for (DType dt : {DType::F32, DType::BF16}) {
    const int64_t T = 3, d = 37;
    Tensor X = random_act({T, 4, d}, dt, rng);
    Tensor fn = random_f32({24, 4 * d}, rng, 0.1f), base = random_f32({24}, rng, 0.5f), scale = random_f32({3}, rng);
    Tensor w = random_act({d}, dt, rng);
    const NormParams np{1e-6f};
    PreOut a(T, d, 4, dt), b(T, d, 4, dt);
    Tensor yn_a = Tensor::empty({T, d}, DType::F32), yn_b = Tensor::empty({T, d}, DType::F32);
    poison(yn_a), poison(yn_b);
    mhc_pre(X, fn, base, scale, MhcParams{}, a.mix, a.y, a.post, a.comb);
    rms_norm(a.y, w, yn_a, np);
    mhc_pre_norm(X, fn, base, scale, MhcParams{}, w, np, b.mix, b.y, yn_b, b.post, b.comb);
    EXPECT_EQ(values(b.y), values(a.y));
    EXPECT_EQ(values(yn_b), values(yn_a));
    EXPECT_EQ(values(b.comb), values(a.comb));
    // y undefined: rounded to yn's dtype, not stored
    Tensor yn_c = Tensor::empty({T, d}, DType::F32);
    PreOut c(T, d, 4, dt);
    mhc_pre_norm(X, fn, base, scale, MhcParams{}, w, np, c.mix, Tensor(), yn_c, c.post, c.comb);
    if (dt == DType::F32) {
      EXPECT_EQ(values(yn_c), values(yn_a));
    }
  }
}

TEST(ModelopsMhc, CudaSplitKAndSinkhornMatchCpu) {
  DSA_REQUIRE_CUDA();
  Rng rng(21);
  Device g = Device::cuda();
  // T = 1 and 3 split the 24 dots over many slices; 32 does not; hc = 2 and 8 take other
  // register-Sinkhorn instantiations; d = 1027 has a ragged last slice.
  for (auto [T, d, hc, dt] : {std::tuple{1L, 4096L, 4, DType::F32}, std::tuple{3L, 1027L, 4, DType::BF16},
                              std::tuple{32L, 4096L, 4, DType::F32}, std::tuple{1L, 7168L, 4, DType::F32},
                              std::tuple{1L, 513L, 2, DType::F32}, std::tuple{3L, 300L, 8, DType::BF16}}) {
    MhcParams p = params_hc(hc);
    const int nm = (2 + hc) * hc;
    Tensor X = random_act({T, hc, d}, dt, rng);
    Tensor fn = random_f32({nm, hc * d}, rng, 0.02f), base = random_f32({nm}, rng, 0.5f);
    Tensor scale = random_f32({3}, rng, 1.f);
    PreOut ref(T, d, hc, dt);
    mhc_pre_cpu(X, fn, base, scale, p, ref.mix, ref.y, ref.post, ref.comb);
    PreOut out(T, d, hc, dt, g);
    mhc_pre(X.to(g), fn.to(g), base.to(g), scale.to(g), p, out.mix, out.y, out.post, out.comb);
    std::string what = fmt::format("mhc_pre T={} d={} hc={} {}", T, d, hc, dtype_name(dt));
    expect_close(out.mix, ref.mix, 1e-4, 1e-4, what + " mix");
    expect_close(out.post, ref.post, 1e-5, 1e-4, what + " post");
    expect_close(out.comb, ref.comb, 1e-5, 1e-3, what + " comb");
    const double ytol = dt == DType::BF16 ? 8e-3 : 1e-4;
    expect_close(out.y, ref.y, ytol, ytol, what + " y");
  }
}

TEST(ModelopsMhc, CudaPreNormAndHeadNormMatchCpuSequence) {
  DSA_REQUIRE_CUDA();
  Rng rng(22);
  Device g = Device::cuda();
  // d = 8200 exceeds the fused row (8192): the two-op fallback.
  for (auto [T, d, dt, ydt] : {std::tuple{1L, 4096L, DType::F32, DType::F32}, std::tuple{3L, 4096L, DType::F32, DType::BF16},
                               std::tuple{32L, 1027L, DType::BF16, DType::F32}, std::tuple{1L, 7168L, DType::BF16, DType::BF16},
                               std::tuple{3L, 5L, DType::F32, DType::F32}, std::tuple{1L, 8200L, DType::F32, DType::F32}}) {
    MhcParams p;
    const NormParams np{1e-6f};
    Tensor X = random_act({T, 4, d}, dt, rng);
    Tensor fn = random_f32({24, 4 * d}, rng, 0.02f), base = random_f32({24}, rng, 0.5f);
    Tensor scale = random_f32({3}, rng, 1.f), w = random_act({d}, ydt, rng);
    // reference: the two CPU ops in sequence
    PreOut ref(T, d, 4, ydt);
    Tensor ref_yn = Tensor::empty({T, d}, ydt);
    mhc_pre_cpu(X, fn, base, scale, p, ref.mix, ref.y, ref.post, ref.comb);
    rms_norm_cpu(ref.y, w, ref_yn, np);
    PreOut out(T, d, 4, ydt, g);
    Tensor yn = Tensor::empty({T, d}, ydt, g);
    poison(yn);
    Tensor Xd = X.to(g), fnd = fn.to(g), based = base.to(g), scd = scale.to(g), wd = w.to(g);
    mhc_pre_norm(Xd, fnd, based, scd, p, wd, np, out.mix, out.y, yn, out.post, out.comb);
    std::string what = fmt::format("mhc_pre_norm T={} d={} x={} y={}", T, d, dtype_name(dt), dtype_name(ydt));
    const double ytol = ydt == DType::BF16 ? 8e-3 : 1e-4;
    expect_close(out.mix, ref.mix, 1e-4, 1e-4, what + " mix");
    expect_close(out.post, ref.post, 1e-5, 1e-4, what + " post");
    expect_close(out.comb, ref.comb, 1e-5, 1e-3, what + " comb");
    expect_close(out.y, ref.y, ytol, ytol, what + " y");
    expect_close(yn, ref_yn, 2 * ytol, 2 * ytol, what + " yn");  // y's rounding may flip, then the norm's
    // y undefined (not stored)
    Tensor yn2 = Tensor::empty({T, d}, ydt, g);
    poison(yn2);
    PreOut out2(T, d, 4, ydt, g);
    mhc_pre_norm(Xd, fnd, based, scd, p, wd, np, out2.mix, Tensor(), yn2, out2.post, out2.comb);
    expect_close(yn2, ref_yn, 2 * ytol, 2 * ytol, what + " yn (no y)");
    // head + final norm, unweighted and weighted, in place of nothing
    Tensor hfn = random_f32({4, 4 * d}, rng, 0.02f), hbase = random_f32({4}, rng), hscale = random_f32({1}, rng);
    Tensor hmix = Tensor::empty({T, 4}, DType::F32), hy = Tensor::empty({T, d}, ydt), hyn = Tensor::empty({T, d}, ydt);
    mhc_head_cpu(X, hfn, hbase, hscale, p, hmix, hy);
    rms_norm_cpu(hy, w, hyn, np);
    Tensor dmix = Tensor::empty({T, 4}, DType::F32, g), dy = Tensor::empty({T, d}, ydt, g);
    Tensor dyn = Tensor::empty({T, d}, ydt, g);
    poison(dmix), poison(dy), poison(dyn);
    mhc_head_norm(Xd, hfn.to(g), hbase.to(g), hscale.to(g), p, wd, np, dmix, dy, dyn);
    expect_close(dmix, hmix, 1e-4, 1e-4, what + " head mix");
    expect_close(dy, hy, ytol, ytol, what + " head y");
    expect_close(dyn, hyn, 2 * ytol, 2 * ytol, what + " head yn");
  }
}

// ---- fused post + next pre + RMSNorm -----------------------------------------------------------

namespace {
Tensor copy_of(const Tensor& t) {
  Tensor c = Tensor::empty(t.shape(), t.dtype(), t.device());
  c.copy_from(t);
  return c;
}

// One sub-layer boundary: X, f and this sub-layer's post/comb; the next sub-layer's weights.
struct Boundary {
  Tensor X, f, post, comb, fn, base, scale, w;
  Boundary(int64_t T, int64_t d, int hc, DType xdt, DType fdt, Rng& rng) {
    const int nm = (2 + hc) * hc;
    X = random_act({T, hc, d}, xdt, rng);
    f = random_act({T, d}, fdt, rng);
    post = random_f32({T, hc}, rng);
    comb = random_f32({T, hc, hc}, rng, 0.5f);
    fn = random_f32({nm, hc * d}, rng, 0.02f);
    base = random_f32({nm}, rng, 0.5f);
    scale = random_f32({3}, rng, 1.f);
    w = random_act({d}, DType::BF16, rng);
  }
};
}  // namespace

TEST(ModelopsMhc, PostPreNormCpuIsPostThenPreNorm) {
  Rng rng(31);
  const int64_t T = 3, d = 37;
  Boundary b(T, d, 4, DType::F32, DType::BF16, rng);
  const NormParams np{1e-6f};
  // the sequence
  Tensor Xa = copy_of(b.X);
  PreOut a(T, d, 4, DType::F32);
  Tensor yn_a = Tensor::empty({T, d}, DType::BF16);
  mhc_post_cpu(b.f, Xa, b.post, b.comb, Xa);
  mhc_pre_norm_cpu(Xa, b.fn, b.base, b.scale, MhcParams{}, b.w, np, a.mix, a.y, yn_a, a.post, a.comb);
  // the fused op, post/comb in and out the same tensors
  Tensor Xb = copy_of(b.X), post = copy_of(b.post), comb = copy_of(b.comb);
  PreOut o(T, d, 4, DType::F32);
  Tensor yn_b = Tensor::empty({T, d}, DType::BF16);
  poison(yn_b);
  mhc_post_pre_norm(b.f, Xb, post, comb, b.fn, b.base, b.scale, MhcParams{}, b.w, np, o.mix, o.y, yn_b, post, comb);
  EXPECT_EQ(values(Xb), values(Xa));
  EXPECT_EQ(values(o.mix), values(a.mix));
  EXPECT_EQ(values(yn_b), values(yn_a));
  EXPECT_EQ(values(post), values(a.post));
  EXPECT_EQ(values(comb), values(a.comb));
}

TEST(ModelopsMhc, CudaPostPreNormMatchesCpuSequence) {
  DSA_REQUIRE_CUDA();
  const uint64_t seed = 32;
  std::printf("seed %llu\n", static_cast<unsigned long long>(seed));
  Rng rng(seed);
  Device g = Device::cuda();
  const NormParams np{1e-6f};
  // T = 1 and 32: decode; T = 300: prefill; d = 1027: a ragged last slice; d = 7168 (V4-Pro):
  // two column passes per CTA; d = 5: one short slice; hc = 2 and d = 8200: the two-op fallback.
  for (auto [T, d, hc, xdt, fdt] :
       {std::tuple{1L, 4096L, 4, DType::F32, DType::BF16}, std::tuple{3L, 1027L, 4, DType::F32, DType::F32},
        std::tuple{32L, 4096L, 4, DType::F32, DType::BF16}, std::tuple{300L, 256L, 4, DType::BF16, DType::BF16},
        std::tuple{1L, 7168L, 4, DType::F32, DType::BF16}, std::tuple{2L, 5L, 4, DType::F32, DType::F32},
        std::tuple{1L, 513L, 2, DType::F32, DType::BF16}, std::tuple{1L, 8200L, 4, DType::F32, DType::BF16}}) {
    MhcParams p = params_hc(hc);
    Boundary b(T, d, hc, xdt, fdt, rng);
    const std::string what = fmt::format("mhc_post_pre_norm T={} d={} hc={} x={} f={}", T, d, hc, dtype_name(xdt),
                                         dtype_name(fdt));
    // The fused op in place, post/comb in == out, outputs poisoned.
    Tensor Xd = b.X.to(g), post = b.post.to(g), comb = b.comb.to(g);
    PreOut out(T, d, hc, DType::F32, g);
    Tensor yn = Tensor::empty({T, d}, DType::BF16, g);
    poison(yn);
    mhc_post_pre_norm(b.f.to(g), Xd, post, comb, b.fn.to(g), b.base.to(g), b.scale.to(g), p, b.w.to(g), np, out.mix,
                      out.y, yn, post, comb);
    // X' equals the unfused CUDA post bit for bit (and the CPU post within its rounding).
    Tensor Xp = b.X.to(g);
    mhc_post(b.f.to(g), Xp, b.post.to(g), b.comb.to(g), Xp);
    const Tensor Xh = Xp.to(Device::cpu());
    EXPECT_EQ(values(Xd), values(Xh)) << what;
    Tensor Xr = copy_of(b.X);
    mhc_post_cpu(b.f, Xr, b.post, b.comb, Xr);
    const double xtol = xdt == DType::BF16 ? 8e-3 : 1e-5;
    expect_close(Xd, Xr, xtol, xtol, what + " X");
    // The pre + norm against the CPU reference over the same X' (a bf16 X' may differ from the
    // CPU's by an ulp, which the pre would carry into y).
    PreOut ref(T, d, hc, DType::F32);
    Tensor ref_yn = Tensor::empty({T, d}, DType::BF16);
    mhc_pre_norm_cpu(Xh, b.fn, b.base, b.scale, p, b.w, np, ref.mix, ref.y, ref_yn, ref.post, ref.comb);
    expect_close(out.mix, ref.mix, 1e-4, 1e-4, what + " mix");
    expect_close(post, ref.post, 1e-5, 1e-4, what + " post");
    expect_close(comb, ref.comb, 1e-5, 1e-3, what + " comb");
    expect_close(out.y, ref.y, 1e-4, 1e-4, what + " y");
    expect_close(yn, ref_yn, 1.6e-2, 1.6e-2, what + " yn");
  }
}
