// GLM-5.1 (`glm_moe_dsa`) forward against transformers 5.17 (scripts/golden/make_golden_glm5.py):
// the tiny FP8 checkpoint of `dsa make-tiny --arch glm_moe_dsa --seed 1` is written to a temp
// dir, loaded through load_causal_lm, and its logits compared with the golden float32 files
// (short: 24-token prompt, long: 300 tokens; index_topk = 4, so the indexer chooses in both).
//
// Tolerance. transformers runs in float32 with plain (unquantized) latent keys; dsa keeps bf16
// activations between ops and stores the latent in FP8 (fp8_ds_mla: e4m3 keeps 3 mantissa bits,
// 32x the relative error of bf16). The tiny random model with index_topk = 4 is chaotic: a small
// perturbation flips which 4 keys the indexer keeps, and then the logits move by O(1).
// transformers' own bfloat16 run shows it (its *_bfloat16 golden files): on the 300-token prompt
// its top-1 agrees with its float32 run at only 212/300 positions, mean |diff| 0.22. So, following
// docs/model-reference.md §12, we judge relative to that noise floor, measured here from the files:
//  1. top-1 agrees exactly where the indexer has no choice (position < index_topk);
//  2. top-1 disagreements over all prompt positions <= 3 x transformers' bf16-vs-f32 ones + 4,
//     and top-1 agrees on more than a third of them;
//  3. mean |diff| over the compared rows (prefill tail, decode steps teacher-forced with
//     transformers' ids) < max(0.7, 3 x transformers' bf16 mean diff).
// The indexer keys live in the paged FP8 key cache (e4m3 with a power-of-two scale per key, 132 B
// per token, as serving engines keep them); transformers scores float keys. With index_topk = 4
// that quantisation flips selections of this chaotic model, so the agreement dropped when the
// keys moved from per-request f32 buffers into the cache (measured on the CPU, 2026-12-01, before
// -> after: short 18/24 -> 14/24 top-1 (prefill mean |diff| after: 0.46); long 172/300 -> 127/300,
// decode mean 0.64; BF16 twin long 123/300; on the H200 short 11/24, long 126/300, decode mean
// 0.68). Bounds 2-3 were loosened to that (from 2x + 2, "more than half" and max(0.3, 2x), plus
// "half of the decode steps agree", which the long prompt no longer meets: 1/7). They still reject gross mistakes (half-split instead of interleaved RoPE pairs: 4/24
// top-1, mean |diff| 0.80 on the short prompt), and the tight checks with no choice left
// (test_glm5_golden_dense.cpp) are unchanged. The measured numbers are printed.
//
// Why the agreement is loose (measured, issue 7): nothing here is a bug.
//  - Transformers itself, given only dsa's FP8 latent (float32 otherwise, rows of the golden
//    generator's Fp8LatentCache), agrees with its plain float32 run at 21/24 and 197/300 prompt
//    positions; its bf16 run at 19/24 and 212/300; dsa has both (18/24, 172/300).
//  - The indexer: on transformers' own layer inputs dsa keeps the same keys in 89/90 (layer 0)
//    and 90/90 (layer 2) selections of the short prompt, scores within 0.6% of the row maximum;
//    the one difference is an exact tie at score 0 (ReLU kills every head of both keys; torch.topk
//    leaves ties unordered, dsa takes the lower index) (test_glm5_indexer_golden.cpp). In the full
//    forward, layer 0 (no upstream drift) agrees in 1181/1194 selections of the long prompt, every
//    difference a near-tie (k-th vs (k+1)-th transformers score within 0.008 or exactly equal);
//    layer 2 agrees in 971/1194, its inputs having drifted: tokens whose layer-0/1 keys flipped get
//    different hidden states and are then picked (or dropped) by many later queries.
//  - With index_topk >= the sequence and every expert used (no choice left) dsa agrees tightly:
//    test_glm5_golden_dense.cpp.
//
// The Bf16Twin tests run checks 2-4 on the checkpoint's BF16 twin (`--dtype bf16 --seed 1`: the
// FP8 weights dequantized and rounded to bf16, at most 2^-8 relative per weight, the size of
// bf16 activation noise), i.e. the BF16 checkpoint path end to end against transformers. Check 1
// does not apply to a model with different weights: on the long prompt's position 0 the twin's
// layer-1 attention output matches the FP8 model's to bf16 noise (DSA_TRACE), but the rounding
// flips one of layer 1's sigmoid top-k experts and the logits move by ~0.9 (top-1 126 -> 248).
// (Bit-for-bit agreement of BF16 and FP8 models with equal weights: test_glm5_bf16_twin.cpp.)
#include <algorithm>
#include <filesystem>
#include <cmath>
#include <cstdio>
#include <memory>
#include <vector>

#include "common/testing.h"
#include "dsa/model/causal_lm.h"
#include "dsa/model/checkpoint_tiny.h"
#include "dsa/model/glm5/model.h"
#include "dsa/model/safetensors.h"
#include "glm5_golden_util.h"
#include "glm5_test_util.h"

using namespace dsa;
using namespace dsa::test;

namespace {

constexpr double kMeanTol = 0.7;

// `dir`: the checkpoint the golden file was made from, when not the standard one.
void check_golden(const std::string& name, Device dev, bool bf16_twin = false, const std::string& dir = "") {
  const Glm5Golden g = read_glm5_golden(name);
  auto lm = model::load_causal_lm(!dir.empty() ? dir : bf16_twin ? test::glm5_tiny_bf16_dir() : test::glm5_tiny_dir(), dev);
  const int64_t V = lm->config().vocab_size, T = static_cast<int64_t>(g.prompt.size());
  const int64_t K = g.prefill_logits.size(0), N = static_cast<int64_t>(g.decode_ids.size());
  const Glm5Run run = run_glm5_golden(*lm, g);
  const Tensor& logits = run.prefill;

  Agreement top1_all, prefill, decode;
  for (int64_t t = 0; t < T; ++t) top1_all.add_top1(logits.data<float>() + t * V, V, g.prefill_top1[t]);
  for (int64_t i = 0; i < K; ++i)
    prefill.add_row(logits.data<float>() + (T - K + i) * V, g.prefill_logits.data<float>() + i * V, V,
                    g.prefill_top1[T - K + i]);
  for (int64_t i = 1; i < N; ++i)
    decode.add_row(run.decode.data<float>() + (i - 1) * V, g.decode_logits.data<float>() + i * V, V, g.decode_ids[i]);

  // The noise floor: transformers' own bfloat16 run against its float32 run on the same prompt.
  const Glm5Golden gb = read_glm5_golden(name + "_bfloat16");
  Agreement base_top1, base;
  for (int64_t t = 0; t < T; ++t) base_top1.rows++, base_top1.top1_agree += gb.prefill_top1[t] == g.prefill_top1[t];
  for (int64_t i = 0; i < K; ++i)
    base.add_row(gb.prefill_logits.data<float>() + i * V, g.prefill_logits.data<float>() + i * V, V,
                 g.prefill_top1[T - K + i]);

  std::printf("[glm5 golden %s on %s%s] prefill top-1 %d/%d positions; last %lld rows: top-1 %d/%d, |diff| max %.4f "
              "mean %.5f p99 %.4f; decode %lld steps: top-1 %d/%d, |diff| max %.4f mean %.5f p99 %.4f\n",
              name.c_str(), dev.str().c_str(), bf16_twin ? ", bf16 twin" : "", top1_all.top1_agree, top1_all.rows, static_cast<long long>(K),
              prefill.top1_agree, prefill.rows, prefill.max_diff, prefill.sum_diff / prefill.values,
              prefill.quantile(0.99), static_cast<long long>(N - 1), decode.top1_agree, decode.rows, decode.max_diff,
              decode.sum_diff / decode.values, decode.quantile(0.99));
  std::printf("[glm5 golden %s] transformers bf16 vs f32: prefill top-1 %d/%d positions; last %lld rows |diff| max %.4f "
              "mean %.5f p99 %.4f\n", name.c_str(), base_top1.top1_agree, base_top1.rows, static_cast<long long>(K),
              base.max_diff, base.sum_diff / base.values, base.quantile(0.99));

  // 1. Where the indexer has no choice (position < index_topk: every key is kept) only precision
  //    separates the two: top-1 must agree.
  const int64_t topk = lm->config().index_topk;
  for (int64_t t = 0; t < (bf16_twin ? 0 : std::min(T, topk)); ++t) {
    const float* r = logits.data<float>() + t * V;
    EXPECT_EQ(std::max_element(r, r + V) - r, g.prefill_top1[t]) << "position " << t;
  }
  // 2. Top-1 over all prompt positions: at most three times transformers' own bf16-vs-f32
  //    disagreements (+4), and more than a third agree.
  const int ours_bad = top1_all.rows - top1_all.top1_agree, base_bad = base_top1.rows - base_top1.top1_agree;
  EXPECT_LE(ours_bad, 3 * base_bad + 4);
  EXPECT_GT(3 * top1_all.top1_agree, top1_all.rows);
  // 3. Mean |logit diff| of the compared rows (prefill tail and decode steps) below
  //    max(kMeanTol, 3 x transformers' bf16 mean diff).
  const double mean_bound = std::max(kMeanTol, 3 * base.sum_diff / base.values);
  EXPECT_LT(prefill.sum_diff / prefill.values, mean_bound);
  EXPECT_LT(decode.sum_diff / decode.values, mean_bound);
}

}  // namespace

TEST(Glm5Golden, ShortPrompt) { check_golden("short", Device::cpu()); }
TEST(Glm5Golden, LongPrompt) { check_golden("long", Device::cpu()); }
TEST(Glm5Golden, CudaShortPrompt) {
  DSA_REQUIRE_CUDA();
  check_golden("short", Device::cuda(0));
}
TEST(Glm5Golden, CudaLongPrompt) {
  DSA_REQUIRE_CUDA();
  check_golden("long", Device::cuda(0));
}
TEST(Glm5Golden, Bf16TwinShortPrompt) { check_golden("short", Device::cpu(), true); }
TEST(Glm5Golden, Bf16TwinLongPrompt) { check_golden("long", Device::cpu(), true); }
TEST(Glm5Golden, CudaBf16TwinShortPrompt) {
  DSA_REQUIRE_CUDA();
  check_golden("short", Device::cuda(0), true);
}
TEST(Glm5Golden, CudaBf16TwinLongPrompt) {
  DSA_REQUIRE_CUDA();
  check_golden("long", Device::cuda(0), true);
}

// The checkpoint in the storage transformers writes (`make-tiny --seed 1 --bf16 --variant
// transformers`: bf16 router bias) against transformers reading those same files
// (scripts/gpu/make_variant_goldens.sh; torch 2.15 + transformers 5.17 on the CPU, 2026-12-01).
// The bounds are the bf16 twin's (check 1 off): on these bf16 weights position 0 of the long
// prompt (token 395) is a near-tie for dsa -- dsa gives 248 (3.168) over 126 (2.543),
// transformers 126 (3.439) -- and dsa gives exactly the same on the plain bf16 twin without the
// variant (`--seed 1 --bf16`), while its FP8 run agrees with transformers (126, 3.461): the
// rounding of the weights to bf16, not the variant's storage, moves it. transformers reads the
// variant and its release form bit-identically, as dsa does (tests/loader/test_variants.cpp).
// Measured: short 16/24 prompt positions, mean 0.22 / 0.15; long 186/300, mean 0.21 / 0.19.
void check_variant_golden(const std::string& prompt) {
  const std::string name = prompt + "_transformers";
  if (!std::filesystem::exists(glm5_golden_path(name)) || !std::filesystem::exists(glm5_golden_path(name + "_bfloat16")))
    GTEST_SKIP() << glm5_golden_path(name) << " not generated yet: run scripts/gpu/make_variant_goldens.sh";
  check_golden(name, Device::cpu(), /*bf16_twin=*/true, test::glm5_tiny_transformers_dir());
}
TEST(Glm5Golden, TransformersVariantShortPrompt) { check_variant_golden("short"); }
TEST(Glm5Golden, TransformersVariantLongPrompt) { check_variant_golden("long"); }
