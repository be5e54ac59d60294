// GLM-5.1 forward against transformers 5.17 with no discrete choice left: the *_dense golden files
// (scripts/golden/make_golden_glm5.py) come from the tiny checkpoint of `dsa make-tiny --arch
// glm_moe_dsa --seed 1` with config index_topk = 512 (>= prompt + decode length: the indexer keeps
// every visible key) and num_experts_per_tok = n_routed_experts (every token uses every expert).
// Neither a key selection nor an expert choice can flip, so the logits are a smooth function of
// the weights and agreement is tight; what is left is precision:
//   - transformers: float32 everywhere, the 512-d latent kept in float32;
//   - dsa: bf16 activations between ops, and the latent stored as fp8_ds_mla: e4m3 (3 mantissa
//     bits) with one power-of-two scale per 128-value tile (scale = 2^ceil(log2(amax / 448)), so
//     the tile maximum lands in (224, 448]). A value in a tile keeps a relative rounding error of
//     at most 2^-4 (RMS 2^-3 / sqrt(12) = 3.6% of its binade), 16x bf16's; values far
//     below the tile maximum fall into e4m3's subnormal range and keep only absolute precision
//     2^-10 x scale. The error enters every key and every value of every layer.
// The generator measures both parts with transformers itself, on the same prompt (metadata):
//   fp8kv_vs_f32_*  transformers float32 with every layer's latent passed through the same
//                   fp8_ds_mla round trip, against plain float32 (the FP8 part alone);
//   bf16_vs_f32_*   transformers bfloat16 against float32 (the bf16 part alone);
// and keeps the FP8-latent run's rows (*_fp8kv), which see exactly dsa's latent rounding.
// Bounds, with noise = (bf16 part + FP8 part) as transformers measured them (max and mean):
//   1. against the *_fp8kv rows (the FP8 error is shared; what is left is bf16 noise and e4m3
//      rounding-boundary flips, each one e4m3 step on a few percent of the latent values):
//      max |diff| <= noise_max, mean |diff| <= noise_mean;
//   2. against plain float32 (FP8 included): max <= 1.5 noise_max, mean <= 1.5 noise_mean;
//   3. top-1 agrees with each reference wherever that reference's best logit leads its runner-up
//      by more than 2 noise_max (every prompt position and decode step; flat logits of the random
//      tiny model leave a few near-ties);
//   4. the noise itself stays small (noise_max < 0.5), so a drifting generator cannot loosen 1-3.
// Measured on CPU (short / long): against *_fp8kv max 0.084 / 0.036, mean 0.0146 / 0.0061;
// against float32 max 0.114 / 0.054, mean 0.022 / 0.0092; noise_max 0.169 / 0.088, noise_mean
// 0.032 / 0.0175. A real mistake is far outside: with the indexer's RoPE on half-split pairs the
// choosing golden drops to 7/24 top-1 (test_glm5_golden.cpp), i.e. logit errors of O(1).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>

#include "common/testing.h"
#include "dsa/model/causal_lm.h"
#include "dsa/model/safetensors.h"
#include "glm5_golden_util.h"
#include "glm5_test_util.h"

using namespace dsa;
using namespace dsa::test;

namespace {

constexpr double kPlainFactor = 1.5;

// Top-1 margin of a row: best minus second best.
double margin(const float* r, int64_t V) {
  float a = -INFINITY, b = -INFINITY;
  for (int64_t v = 0; v < V; ++v) {
    if (r[v] > a) b = a, a = r[v];
    else if (r[v] > b) b = r[v];
  }
  return static_cast<double>(a) - b;
}

// dsa's rows against one reference: the prefill tail and decode steps 1..N-1 (logits), and top-1
// at every prompt position where the reference's margin exceeds margin_needed.
struct RowCheck {
  Agreement rows, top1_all;
  int top1_required = 0, top1_missed = 0;
};

RowCheck compare(const Glm5Golden& g, const Glm5Run& run, const Tensor& ref_prefill, const Tensor& ref_decode,
                 const Tensor& ref_top1, const Tensor& ref_margin, int64_t V, double margin_needed,
                 const std::string& what) {
  RowCheck c;
  const int64_t T = static_cast<int64_t>(g.prompt.size()), K = ref_prefill.size(0);
  const int64_t N = static_cast<int64_t>(g.decode_ids.size());
  auto require_top1 = [&](bool agree, double m, const char* where, int64_t at) {
    if (m <= margin_needed) return;
    ++c.top1_required;
    if (agree) return;
    ++c.top1_missed;
    ADD_FAILURE() << what << ": top-1 differs at " << where << " " << at << " (reference margin " << m << ")";
  };
  for (int64_t t = 0; t < T; ++t) {
    const int before = c.top1_all.top1_agree;
    c.top1_all.add_top1(run.prefill.data<float>() + t * V, V, ref_top1.data<int64_t>()[t]);
    require_top1(c.top1_all.top1_agree > before, ref_margin.data<float>()[t], "prompt position", t);
  }
  for (int64_t i = 0; i < K; ++i)
    c.rows.add_row(run.prefill.data<float>() + (T - K + i) * V, ref_prefill.data<float>() + i * V, V,
                   ref_top1.data<int64_t>()[T - K + i]);
  for (int64_t i = 1; i < N; ++i) {
    const float* ref = ref_decode.data<float>() + i * V;
    const float* ours = run.decode.data<float>() + (i - 1) * V;
    const int before = c.rows.top1_agree;
    c.rows.add_row(ours, ref, V, std::max_element(ref, ref + V) - ref);
    require_top1(c.rows.top1_agree > before, margin(ref, V), "decode step", i);
  }
  return c;
}

void check_dense(const std::string& name, Device dev) {
  const Glm5Golden g = read_glm5_golden(name + "_dense");
  const auto file = SafetensorsFile::open(g.path);
  const auto& meta = file->metadata();
  auto lm = model::load_causal_lm(glm5_tiny_dense_dir(), dev);
  const auto& cfg = lm->config();
  const int64_t V = cfg.vocab_size, T = static_cast<int64_t>(g.prompt.size());
  const int64_t N = static_cast<int64_t>(g.decode_ids.size());
  ASSERT_GE(cfg.index_topk, T + N) << "the dense checkpoint must let the indexer keep every key";
  ASSERT_EQ(cfg.num_experts_per_tok, cfg.n_routed_experts) << "the dense checkpoint must use every expert";
  ASSERT_EQ(meta.at("index_topk"), std::to_string(cfg.index_topk));
  ASSERT_EQ(meta.at("num_experts_per_tok"), std::to_string(cfg.num_experts_per_tok));
  // Same weights as the choosing files, whose hash tests/loader/test_golden_files.cpp checks
  // against a freshly made tiny checkpoint.
  ASSERT_EQ(meta.at("weights_fnv1a64"), SafetensorsFile::open(glm5_golden_path("short"))->metadata().at("weights_fnv1a64"));
  const double noise_max = std::stod(meta.at("bf16_vs_f32_max_abs_diff")) + std::stod(meta.at("fp8kv_vs_f32_max_abs_diff"));
  const double noise_mean =
      std::stod(meta.at("bf16_vs_f32_mean_abs_diff")) + std::stod(meta.at("fp8kv_vs_f32_mean_abs_diff"));
  ASSERT_LT(noise_max, 0.5) << "transformers' own bf16 / FP8-latent runs moved by more than expected";

  const Glm5Run run = run_glm5_golden(*lm, g);
  const RowCheck fp8 = compare(g, run, file->tensor("prefill_logits_fp8kv").contiguous(),
                               file->tensor("decode_logits_fp8kv").contiguous(),
                               file->tensor("prefill_top1_fp8kv").contiguous(),
                               file->tensor("prefill_top1_margin_fp8kv").contiguous(), V, 2 * noise_max,
                               name + " vs transformers f32 + fp8_ds_mla latent");
  Tensor ref_top1 = Tensor::empty({T}, DType::I64);
  for (int64_t t = 0; t < T; ++t) ref_top1.data<int64_t>()[t] = g.prefill_top1[t];
  const RowCheck f32 = compare(g, run, g.prefill_logits, g.decode_logits, ref_top1,
                               file->tensor("prefill_top1_margin").contiguous(), V, 2 * noise_max,
                               name + " vs transformers f32");

  for (const auto* c : {&fp8, &f32}) {
    Agreement rows = c->rows;
    std::printf("[glm5 dense golden %s on %s] vs transformers f32%s: top-1 %d/%d prompt positions (%d with margin > "
                "%.3f: %d missed); %d prompt + %lld decode rows: |diff| max %.4f mean %.5f p99 %.4f\n",
                name.c_str(), dev.str().c_str(), c == &fp8 ? " + fp8_ds_mla latent" : "", c->top1_all.top1_agree,
                c->top1_all.rows, c->top1_required, 2 * noise_max, c->top1_missed,
                static_cast<int>(g.prefill_logits.size(0)), static_cast<long long>(N - 1), rows.max_diff,
                rows.mean(), rows.quantile(0.99));
  }
  std::printf("[glm5 dense golden %s] transformers alone: fp8_ds_mla latent vs f32 max %.4f mean %.5f; bf16 vs f32 "
              "max %.4f mean %.5f\n", name.c_str(), std::stod(meta.at("fp8kv_vs_f32_max_abs_diff")),
              std::stod(meta.at("fp8kv_vs_f32_mean_abs_diff")), std::stod(meta.at("bf16_vs_f32_max_abs_diff")),
              std::stod(meta.at("bf16_vs_f32_mean_abs_diff")));

  EXPECT_LE(fp8.rows.max_diff, noise_max);
  EXPECT_LE(fp8.rows.mean(), noise_mean);
  EXPECT_LE(f32.rows.max_diff, kPlainFactor * noise_max);
  EXPECT_LE(f32.rows.mean(), kPlainFactor * noise_mean);
  EXPECT_EQ(fp8.top1_missed, 0);
  EXPECT_EQ(f32.top1_missed, 0);
}

}  // namespace

TEST(Glm5GoldenDense, ShortPrompt) { check_dense("short", Device::cpu()); }
TEST(Glm5GoldenDense, LongPrompt) { check_dense("long", Device::cpu()); }
TEST(Glm5GoldenDense, CudaShortPrompt) {
  DSA_REQUIRE_CUDA();
  check_dense("short", Device::cuda(0));
}
TEST(Glm5GoldenDense, CudaLongPrompt) {
  DSA_REQUIRE_CUDA();
  check_dense("long", Device::cuda(0));
}
