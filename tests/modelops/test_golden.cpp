// The model ops against vectors produced by transformers 5.17's own DeepSeek-V4 and GLM-5.1
// modules (scripts/golden/modelops_golden.py, float32 on the CPU; tests/data/modelops/*.json).
#include <cmath>
#include <fstream>
#include <map>

#include <nlohmann/json.hpp>

#include "dsa/ops/compressor/compressor.h"
#include "dsa/ops/indexer/indexer.h"
#include "dsa/ops/mhc/mhc.h"
#include "dsa/ops/norm/norm.h"
#include "dsa/ops/rope/rope.h"
#include "common/op_helpers.h"

using namespace dsa;
using namespace dsa::ops;
using namespace dsa::test;
using json = nlohmann::json;

namespace {

json load(const std::string& name) {
  std::string path = std::string(DSA_TEST_DATA_DIR) + "/modelops/" + name;
  std::ifstream f(path);
  if (!f) throw Error("cannot open golden file " + path);
  return json::parse(f);
}

Tensor tensor(const json& v, const Shape& shape) { return f32_from(v.get<std::vector<float>>(), shape); }

std::vector<float> vec(const json& v) { return v.get<std::vector<float>>(); }

Tensor positions(const json& v) {
  std::vector<int64_t> p = v.get<std::vector<int64_t>>();
  Tensor t = Tensor::empty({static_cast<int64_t>(p.size())}, DType::I64);
  for (size_t i = 0; i < p.size(); ++i) t.data<int64_t>()[i] = p[i];
  return t;
}

// Expected top-k rows: transformers pads with -1 (V4) or fills invalid picks with arbitrary
// future entries (GLM, mask-based): compare the first min(k, visible) entries, and for V4 the -1s.
// Where transformers' scores tie (relu makes exact zeros common), torch.topk's order among the
// tied entries is unspecified; dsa takes the lower index first. `scores` ([T][N] golden scores,
// may be empty) lets a slot pass when both picks have the same golden score.
void expect_topk(const Tensor& idx, const json& golden, const std::vector<int64_t>& visible, bool compare_padding,
                 const std::string& what, const std::vector<float>& scores = {}, int64_t N = 0) {
  const int64_t T = idx.size(0), K = idx.size(1);
  for (int64_t t = 0; t < T; ++t) {
    const std::vector<int64_t> want = golden[t].get<std::vector<int64_t>>();
    const int64_t valid = std::min<int64_t>(visible[t], K);
    for (int64_t i = 0; i < K; ++i) {
      const int32_t got = idx.data<int32_t>()[t * K + i];
      if (i < valid) {
        if (got != want[i] && !scores.empty() && got >= 0 && scores[t * N + got] == scores[t * N + want[i]]) continue;
        EXPECT_EQ(got, want[i]) << what << " token " << t << " slot " << i;
      } else {
        EXPECT_EQ(got, -1) << what << " token " << t << " slot " << i;
        if (compare_padding && i < static_cast<int64_t>(want.size())) {
          EXPECT_EQ(want[i], -1);
        }
      }
    }
  }
}

}  // namespace

TEST(ModelopsGolden, V4RopeMainAndCompress) {
  json g = load("v4_rope.json");
  const int64_t T = g["T"].get<int64_t>(), H = g["H"].get<int64_t>(), D = g["D"].get<int64_t>();
  Tensor pos = positions(g["positions"]);
  for (const char* kind : {"main", "compress"}) {
    RopeConfig cfg = std::string(kind) == "main" ? RopeConfig::v4_main() : RopeConfig::v4_compress();
    expect_close(rope_inv_freq(cfg), vec(g[std::string(kind) + "_inv_freq"]), 0, 2e-7, std::string(kind) + " inv_freq");
    for (bool inverse : {false, true}) {
      Tensor x = tensor(g["x"], {T, H, D});
      apply_rope(x, pos, cfg, RopeParams{D - 64, inverse});
      // Positions up to 70001: a one-ulp difference of an inv_freq between torch's fp32 pow and
      // our double pow moves an angle by up to ~4e-3 rad at the highest frequencies.
      expect_close(values(x), vec(g[std::string(kind) + (inverse ? "_inverse" : "_rotated")]), 5e-3, 1e-4,
                   std::string(kind) + (inverse ? " inverse" : " rotated"));
      // the nope part is untouched, and small positions agree tightly
      Tensor x2 = tensor(g["x"], {T, H, D}).slice(0, 0, 3);
      apply_rope(x2, pos.slice(0, 0, 3), cfg, RopeParams{D - 64, inverse});
      std::vector<float> want = vec(g[std::string(kind) + (inverse ? "_inverse" : "_rotated")]);
      want.resize(static_cast<size_t>(3 * H * D));
      // angle error <= pos * ulp(inv_freq) ~ 1000 * 6e-8
      expect_close(values(x2), want, 2e-4, 1e-5, std::string(kind) + " positions <= 1000");
    }
  }
}

TEST(ModelopsGolden, V4MhcPrePostHead) {
  json g = load("v4_mhc.json");
  const int64_t T = g["T"].get<int64_t>(), hc = g["hc"].get<int64_t>(), d = g["d"].get<int64_t>();
  MhcParams p;
  p.hc_mult = static_cast<int>(hc);
  p.sinkhorn_iters = g["iters"].get<int>();
  p.hc_eps = g["hc_eps"].get<float>();
  p.norm_eps = g["norm_eps"].get<float>();
  Tensor X = tensor(g["X"], {T, hc, d});
  Tensor mix = Tensor::empty({T, (2 + hc) * hc}, DType::F32), y = Tensor::empty({T, d}, DType::F32);
  Tensor post = Tensor::empty({T, hc}, DType::F32), comb = Tensor::empty({T, hc, hc}, DType::F32);
  mhc_pre(X, tensor(g["fn"], {(2 + hc) * hc, hc * d}), tensor(g["base"], {(2 + hc) * hc}), tensor(g["scale"], {3}), p,
          mix, y, post, comb);
  expect_close(values(post), vec(g["post"]), 1e-6, 1e-5, "post");
  expect_close(values(comb), vec(g["comb"]), 1e-6, 1e-5, "comb");
  expect_close(values(y), vec(g["y"]), 1e-5, 1e-5, "collapsed y");
  Tensor out = Tensor::empty({T, hc, d}, DType::F32);
  mhc_post(tensor(g["f"], {T, d}), X, tensor(g["post"], {T, hc}), tensor(g["comb"], {T, hc, hc}), out);
  expect_close(values(out), vec(g["out"]), 1e-5, 1e-5, "post residual");
  Tensor hmix = Tensor::empty({T, hc}, DType::F32);
  mhc_head(X, tensor(g["head_fn"], {hc, hc * d}), tensor(g["head_base"], {hc}), tensor(g["head_scale"], {1}), p, hmix, y);
  expect_close(values(y), vec(g["head_y"]), 1e-5, 1e-5, "head y");
}

TEST(ModelopsGolden, V4CompressorsAndIndexer) {
  json g = load("v4_compressor.json");
  const int64_t S = g["S"].get<int64_t>();
  const float eps = g["norm_eps"].get<float>();
  std::map<std::string, Tensor> entries;
  for (const char* name : {"hca", "csa", "idx"}) {
    const json& c = g[name];
    CompressorConfig cfg = CompressorConfig::v4(c["ratio"].get<int64_t>(), c["head_dim"].get<int64_t>(), eps);
    const int64_t W = cfg.width(), d = cfg.head_dim, n = S / cfg.ratio;
    Tensor kv = tensor(c["kv"], {S, W}), sc = tensor(c["score"], {S, W});
    Tensor ape = tensor(c["ape"], {cfg.ratio, W}), nw = tensor(c["norm_weight"], {d});
    for (int64_t split : {S, int64_t{5}}) {  // whole, then two chunks (5 + rest)
      CompressorState st = CompressorState::create(cfg);
      Tensor out = Tensor::empty({n, d}, DType::F32);
      poison(out);
      CompressorResult r1 = compressor_forward(cfg, st, kv.slice(0, 0, split), sc.slice(0, 0, split), ape, nw, out);
      CompressorResult r2{};
      if (split < S)
        r2 = compressor_forward(cfg, st, kv.slice(0, split, S), sc.slice(0, split, S), ape, nw,
                                out.slice(0, r1.count, n));
      EXPECT_EQ(r1.count + r2.count, n);
      expect_close(values(out), vec(c["entries"]), 2e-5, 2e-5, fmt::format("{} entries, split {}", name, split));
      entries[name] = out;
    }
  }
  // Indexer: raw q -> RoPE (compress) on the trailing 64 dims -> scores against the indexer
  // compressor's entries -> top-k, against transformers' DeepseekV4Indexer output.
  const json& c = g["idx"];
  const int64_t H = c["n_heads"].get<int64_t>(), D = c["head_dim"].get<int64_t>(), K = c["topk"].get<int64_t>();
  Tensor q = tensor(c["q"], {S, H, D});
  Tensor pos = positions(g["positions"]);
  apply_rope(q, pos, RopeConfig::v4_compress(), RopeParams{D - 64});
  const int64_t N = c["entries_count"].get<int64_t>(), m = c["ratio"].get<int64_t>();
  Tensor idx = Tensor::empty({S, K}, DType::I32), scores = Tensor::empty({S, N}, DType::F32);
  poison(idx);
  indexer_topk(q, entries["idx"], tensor(c["weights"], {S, H}), pos, IndexerParams::v4(K, H, D, m), idx, scores);
  std::vector<float> golden_scores = vec(c["scores"]), ours = values(scores);
  std::vector<int64_t> visible;
  for (int64_t t = 0; t < S; ++t) {
    visible.push_back((t + 1) / m);
    for (int64_t e = 0; e < visible.back(); ++e)  // transformers scores every entry; only visible ones matter
      EXPECT_NEAR(ours[t * N + e], golden_scores[t * N + e], 2e-5) << "score token " << t << " entry " << e;
  }
  expect_topk(idx, c["top"], visible, true, "v4 indexer", golden_scores, N);
}

TEST(ModelopsGolden, GlmIndexer) {
  json g = load("glm_indexer.json");
  const int64_t S = g["S"].get<int64_t>(), H = g["n_heads"].get<int64_t>(), D = g["head_dim"].get<int64_t>(),
                K = g["topk"].get<int64_t>();
  RopeConfig rope = RopeConfig::glm(g["rope_theta"].get<double>());
  Tensor pos = positions(g["positions"]);
  Tensor k_raw = tensor(g["k_raw"], {S, D});
  Tensor k = Tensor::empty({S, D}, DType::F32);
  layer_norm(k_raw, tensor(g["k_norm_weight"], {D}), tensor(g["k_norm_bias"], {D}), k, NormParams{1e-6f});
  // transformers' layout: rotated first 64 dims written de-interleaved
  Tensor k_deint = Tensor::empty({S, D}, DType::F32);
  k_deint.copy_from(k);
  apply_rope(k_deint, pos, rope, RopeParams{0, false, true});
  expect_close(values(k_deint), vec(g["k_final_deinterleaved"]), 1e-5, 1e-5, "glm indexer k");
  // dsa's layout: interleaved for q and k alike; q.k and hence the top-k are the same.
  apply_rope(k, pos, rope, RopeParams{0});
  Tensor q = tensor(g["q"], {S, H, D});
  apply_rope(q, pos, rope, RopeParams{0});
  Tensor idx = Tensor::empty({S, K}, DType::I32);
  poison(idx);
  indexer_topk(q, k, tensor(g["weights"], {S, H}), pos, IndexerParams::glm(K, H, D), idx);
  std::vector<int64_t> visible;
  for (int64_t t = 0; t < S; ++t) visible.push_back(t + 1);
  expect_topk(idx, g["top"], visible, false, "glm indexer");
}
