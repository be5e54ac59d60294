#include <cmath>
#include <limits>

#include "dsa/ops/compressor/compressor.h"
#include "common/op_helpers.h"

using namespace dsa;
using namespace dsa::ops;
using namespace dsa::test;

namespace {

// Independent whole-sequence formulation (transformers' DeepseekV4{CSA,HCA}Compressor without a
// cache): windows of m tokens; for overlap, window w pools [Ca rows of window w-1 | Cb rows of
// window w] with softmax over 2m rows per dimension (window 0: Cb rows only), then RMSNorm * w,
// then RoPE at w * m. Everything in double, RoPE via apply_rope_cpu on an f32 copy.
std::vector<float> whole_sequence(const CompressorConfig& cfg, const Tensor& kv, const Tensor& score, const Tensor& ape,
                                  const Tensor& nw) {
  const int64_t m = cfg.ratio, d = cfg.head_dim, W = cfg.width(), T = kv.size(0), n = T / m;
  Tensor out = Tensor::empty({n, d}, DType::F32);
  for (int64_t w = 0; w < n; ++w) {
    std::vector<double> pooled(d);
    for (int64_t k = 0; k < d; ++k) {
      std::vector<std::pair<double, double>> rows;  // (score, kv)
      auto add = [&](int64_t tok, int64_t col) {
        rows.push_back({double(at(score, tok * W + col)) + at(ape, (tok % m) * W + col), at(kv, tok * W + col)});
      };
      if (cfg.overlap) {
        if (w > 0)
          for (int64_t r = 0; r < m; ++r) add((w - 1) * m + r, k);
        for (int64_t r = 0; r < m; ++r) add(w * m + r, d + k);
      } else {
        for (int64_t r = 0; r < m; ++r) add(w * m + r, k);
      }
      double mx = -1e300, den = 0, num = 0;
      for (auto& [s, v] : rows) mx = std::max(mx, s);
      for (auto& [s, v] : rows) den += std::exp(s - mx), num += std::exp(s - mx) * v;
      pooled[k] = num / den;
    }
    double ss = 0;
    for (double v : pooled) ss += v * v;
    double inv = 1 / std::sqrt(ss / d + cfg.norm_eps);
    for (int64_t k = 0; k < d; ++k) out.data<float>()[w * d + k] = float(pooled[k] * inv * at(nw, k));
  }
  if (n > 0) {
    Tensor pos = Tensor::empty({n}, DType::I64);
    for (int64_t w = 0; w < n; ++w) pos.data<int64_t>()[w] = w * m;
    apply_rope_cpu(out, pos, cfg.rope, RopeParams{d - cfg.rope.rope_dim});
  }
  return values(out);
}

// Feeds [0, T) in the given chunk sizes; returns all entries concatenated.
std::vector<float> chunked(const CompressorConfig& cfg, const Tensor& kv, const Tensor& score, const Tensor& ape,
                           const Tensor& nw, const std::vector<int64_t>& chunks, DType out_dtype = DType::F32) {
  CompressorState st = CompressorState::create(cfg);
  std::vector<float> all;
  int64_t start = 0, expect_entry = 0;
  for (int64_t c : chunks) {
    const int64_t n = compressor_entries_emitted(cfg, start, c);
    Tensor out = Tensor::empty({n + 1, cfg.head_dim}, out_dtype);  // one spare row stays poisoned
    poison(out);
    CompressorResult r = compressor_forward(cfg, st, kv.slice(0, start, start + c), score.slice(0, start, start + c),
                                            ape, nw, out);
    EXPECT_EQ(r.count, n);
    EXPECT_EQ(r.first_entry, expect_entry);
    std::vector<float> v = values(out);
    all.insert(all.end(), v.begin(), v.begin() + n * cfg.head_dim);
    for (int64_t i = n * cfg.head_dim; i < (n + 1) * cfg.head_dim; ++i) EXPECT_TRUE(std::isnan(v[i]));
    start += c;
    expect_entry += n;
    EXPECT_EQ(st.next_pos, start);
  }
  return all;
}

struct Inputs {
  Tensor kv, score, ape, nw;
};
Inputs make_inputs(const CompressorConfig& cfg, int64_t T, Rng& rng, DType dt = DType::F32) {
  return {random_act({T, cfg.width()}, dt, rng), random_act({T, cfg.width()}, dt, rng, 2.f),
          random_f32({cfg.ratio, cfg.width()}, rng), random_act({cfg.head_dim}, dt, rng)};
}

}  // namespace

TEST(ModelopsCompressor, HandComputedNoOverlap) {
  // m = 2, d = 2 (rope over both dims; entry 0 sits at position 0: no rotation). Equal scores:
  // plain average of rows (1,3) and (3,5) = (2,4); RMS = sqrt(10).
  CompressorConfig cfg = CompressorConfig::v4(2, 2);
  cfg.rope.rope_dim = 2;
  cfg.norm_eps = 0.f;
  CompressorState st = CompressorState::create(cfg);
  Tensor out = Tensor::empty({1, 2}, DType::F32);
  poison(out);
  Tensor z = Tensor::zeros({2, 2}, DType::F32);
  CompressorResult r = compressor_forward(cfg, st, f32_from({1, 3, 3, 5}, {2, 2}), z, z, f32_from({1, 1}, {2}), out);
  EXPECT_EQ(r.count, 1);
  EXPECT_NEAR(at(out, 0), 2 / std::sqrt(10.0), 1e-7);
  EXPECT_NEAR(at(out, 1), 4 / std::sqrt(10.0), 1e-7);
  // A huge score on the second row selects it (softmax -> one-hot), rotated by position 2.
  Tensor s2 = f32_from({0, 0, 100, 100}, {2, 2});
  r = compressor_forward(cfg, st, f32_from({1, 3, 3, 4}, {2, 2}), s2, z, f32_from({1, 1}, {2}), out);
  EXPECT_EQ(r.first_entry, 1);
  const double c = std::cos(2.0), s = std::sin(2.0);  // inv_freq 1 for rope_dim 2
  EXPECT_NEAR(at(out, 0), (3 * c - 4 * s) / 5 * std::sqrt(2.0), 1e-6);
  EXPECT_NEAR(at(out, 1), (4 * c + 3 * s) / 5 * std::sqrt(2.0), 1e-6);
}

TEST(ModelopsCompressor, OverlapFirstWindowIgnoresMissingPrevious) {
  // Window 0 of the m = 4 compressor pools only its own Cb half: feeding garbage in the Ca half
  // of window 0 must not change entry 0, but must change entry 1.
  Rng rng;
  CompressorConfig cfg = CompressorConfig::v4(4, 64);
  Inputs in = make_inputs(cfg, 8, rng);
  std::vector<float> a = chunked(cfg, in.kv, in.score, in.ape, in.nw, {8});
  for (int t = 0; t < 4; ++t)
    for (int k = 0; k < 64; ++k) in.kv.data<float>()[t * 128 + k] += 100.f;
  std::vector<float> b = chunked(cfg, in.kv, in.score, in.ape, in.nw, {8});
  for (int k = 0; k < 64; ++k) EXPECT_EQ(a[k], b[k]);
  double diff = 0;
  for (int k = 64; k < 128; ++k) diff += std::abs(a[k] - b[k]);
  EXPECT_GT(diff, 1.0);
}

TEST(ModelopsCompressor, MatchesWholeSequenceFormula) {
  Rng rng;
  for (auto [m, d, T] : {std::tuple{4L, 512L, 37L}, std::tuple{4L, 128L, 64L}, std::tuple{128L, 512L, 300L},
                         std::tuple{8L, 96L, 40L}}) {
    CompressorConfig cfg = CompressorConfig::v4(m, d);
    Inputs in = make_inputs(cfg, T, rng);
    std::vector<float> want = whole_sequence(cfg, in.kv, in.score, in.ape, in.nw);
    std::vector<float> got = chunked(cfg, in.kv, in.score, in.ape, in.nw, {T});
    expect_close(got, want, 1e-5, 1e-5, fmt::format("compressor m={} d={} T={}", m, d, T));
  }
}

TEST(ModelopsCompressor, ChunkedEqualsWholeSequence) {
  Rng rng;
  for (int64_t m : {4L, 128L}) {
    CompressorConfig cfg = CompressorConfig::v4(m, m == 4 ? 128 : 64);
    const int64_t T = m == 4 ? 61 : 400;
    Inputs in = make_inputs(cfg, T, rng, DType::BF16);
    std::vector<float> whole = chunked(cfg, in.kv, in.score, in.ape, in.nw, {T});
    ASSERT_EQ(whole.size(), static_cast<size_t>(T / m * cfg.head_dim));
    // prefill in random chunks, then decode one token at a time
    std::vector<int64_t> chunks;
    int64_t left = T;
    while (left > 20) {
      int64_t c = std::min<int64_t>(left - 20, rng.randint(1, 3 * m));
      chunks.push_back(c);
      left -= c;
    }
    for (; left > 0; --left) chunks.push_back(1);
    std::vector<float> parts = chunked(cfg, in.kv, in.score, in.ape, in.nw, chunks);
    ASSERT_EQ(parts, whole) << "m=" << m;  // bit-identical: same per-token recurrence
    // empty chunks are allowed and change nothing
    chunks.insert(chunks.begin() + 1, 0);
    EXPECT_EQ(chunked(cfg, in.kv, in.score, in.ape, in.nw, chunks), whole);
  }
}

TEST(ModelopsCompressor, Bf16OutputAndState) {
  Rng rng;
  CompressorConfig cfg = CompressorConfig::v4(4, 128);
  Inputs in = make_inputs(cfg, 16, rng);
  std::vector<float> f = chunked(cfg, in.kv, in.score, in.ape, in.nw, {16});
  std::vector<float> b = chunked(cfg, in.kv, in.score, in.ape, in.nw, {16}, DType::BF16);
  // bf16 output rounds once before RoPE and once after
  expect_close(b, f, 2e-2, 2e-2, "bf16 entries");
  EXPECT_EQ(compressor_entries_emitted(cfg, 0, 3), 0);
  EXPECT_EQ(compressor_entries_emitted(cfg, 3, 1), 1);
  EXPECT_EQ(compressor_entries_emitted(cfg, 5, 11), 3);
  CompressorState st = CompressorState::create(cfg);
  Tensor out = Tensor::empty({0, 128}, DType::F32);
  EXPECT_THROW(compressor_forward(cfg, st, in.kv.slice(0, 0, 4), in.score.slice(0, 0, 4), in.ape, in.nw, out), Error);
  EXPECT_THROW(compressor_forward(cfg, st, in.kv.slice(0, 0, 4), in.score.slice(0, 0, 3), in.ape, in.nw, out), Error);
  CompressorState wrong = CompressorState::create(CompressorConfig::v4(128, 128));
  EXPECT_THROW(compressor_forward(cfg, wrong, in.kv.slice(0, 0, 1), in.score.slice(0, 0, 1), in.ape, in.nw, out), Error);
  st.next_pos = 7;
  st.reset();
  EXPECT_EQ(st.next_pos, 0);
}

// ---- CUDA vs CPU ------------------------------------------------------------------------------

TEST(ModelopsCompressor, CudaMatchesCpuAcrossChunks) {
  DSA_REQUIRE_CUDA();
  Rng rng;
  const Device g = Device::cuda();
  for (auto [m, d, T, out_dt] : {std::tuple{4L, 512L, 45L, DType::BF16}, std::tuple{4L, 128L, 33L, DType::F32},
                                 std::tuple{128L, 512L, 300L, DType::BF16}, std::tuple{128L, 64L, 257L, DType::F32}}) {
    CompressorConfig cfg = CompressorConfig::v4(m, d);
    Inputs in = make_inputs(cfg, T, rng, DType::BF16);
    Tensor kv_d = in.kv.to(g), sc_d = in.score.to(g), ape_d = in.ape.to(g), nw_d = in.nw.to(g);
    CompressorState cpu = CompressorState::create(cfg), gpu = CompressorState::create(cfg, g);
    // prefill chunk, a few decode steps, another chunk
    std::vector<int64_t> chunks = {std::min<int64_t>(T, 2 * m + 3)};
    for (int i = 0; i < 5 && chunks[0] + i < T; ++i) chunks.push_back(1);
    int64_t used = 0;
    for (int64_t c : chunks) used += c;
    if (used < T) chunks.push_back(T - used);
    int64_t start = 0;
    for (int64_t c : chunks) {
      const int64_t n = compressor_entries_emitted(cfg, start, c);
      Tensor ref = Tensor::empty({n, d}, out_dt), out = Tensor::empty({n, d}, out_dt, g);
      poison(out);
      CompressorResult a = compressor_forward(cfg, cpu, in.kv.slice(0, start, start + c),
                                              in.score.slice(0, start, start + c), in.ape, in.nw, ref);
      CompressorResult b = compressor_forward(cfg, gpu, kv_d.slice(0, start, start + c), sc_d.slice(0, start, start + c),
                                              ape_d, nw_d, out);
      EXPECT_EQ(a.count, b.count);
      EXPECT_EQ(a.first_entry, b.first_entry);
      const double tol = out_dt == DType::BF16 ? 1.6e-2 : 2e-5;  // bf16: rounding before and after RoPE
      if (n > 0) expect_close(out, ref, tol, tol, fmt::format("compressor cuda m={} d={} chunk at {}", m, d, start));
      start += c;
    }
    EXPECT_EQ(gpu.next_pos, T);
    expect_close(gpu.kv, cpu.kv, 1e-30, 0, "state kv (exact copies)");
  }
}
