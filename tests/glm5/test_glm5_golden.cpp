// GLM-5.1 (`glm_moe_dsa`) forward against transformers 5.17 (scripts/golden/make_golden_glm5.py):
// the tiny FP8 checkpoint of `dsa make-tiny --arch glm_moe_dsa --seed 1` is written to a temp
// dir, loaded through load_causal_lm, and its logits compared with the golden float32 files
// (short: 24-token prompt, long: 300 tokens; index_topk = 4, so the indexer chooses in both).
//
// Tolerance. transformers runs in float32 with plain (unquantized) latent keys; dsa keeps bf16
// activations between ops and stores the latent in FP8 (fp8_ds_mla, e4m3 = 3 mantissa bits, so
// each latent value carries up to 2^-4 relative error). Following REFERENCE section 12 we judge
// by top-1 agreement over every position and decode step plus the distribution of |logit diff|:
//  - top-1 must agree wherever transformers' own top-1 is clear (margin to the runner-up above
//    kClearMargin); near-ties may flip, and at most 2 % of rows may disagree at all;
//  - mean |diff| < kMeanTol and max |diff| < kMaxTol (logits of the tiny model span about +-3).
// The numbers measured are printed (see the closing report of issue 7).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <vector>

#include "common/testing.h"
#include "dsa/model/causal_lm.h"
#include "dsa/model/checkpoint_tiny.h"
#include "dsa/model/glm5/model.h"
#include "dsa/model/safetensors.h"
#include "glm5_test_util.h"

using namespace dsa;

namespace {

constexpr double kClearMargin = 0.05;
constexpr double kMeanTol = 0.02;
constexpr double kMaxTol = 0.25;

struct Golden {
  std::vector<int32_t> prompt;
  Tensor prefill_logits;  // f32 [K][V]: last K prompt positions
  std::vector<int64_t> prefill_top1;
  std::vector<int32_t> decode_ids;
  Tensor decode_logits;   // f32 [N][V]: row i predicts decode_ids[i] (row 0 = last prefill row)
};

Golden read_golden(const std::string& name) {
  auto f = SafetensorsFile::open(std::string(DSA_TEST_DATA_DIR) + "/golden/glm_moe_dsa/" + name + ".safetensors");
  Golden g;
  Tensor ids = f->tensor("prompt_ids"), top1 = f->tensor("prefill_top1"), dids = f->tensor("decode_ids");
  for (int64_t i = 0; i < ids.numel(); ++i) g.prompt.push_back(static_cast<int32_t>(ids.data<int64_t>()[i]));
  for (int64_t i = 0; i < top1.numel(); ++i) g.prefill_top1.push_back(top1.data<int64_t>()[i]);
  for (int64_t i = 0; i < dids.numel(); ++i) g.decode_ids.push_back(static_cast<int32_t>(dids.data<int64_t>()[i]));
  g.prefill_logits = f->tensor("prefill_logits").contiguous();
  g.decode_logits = f->tensor("decode_logits").contiguous();
  return g;
}

// Agreement of one logits row with transformers'.
struct Agreement {
  int rows = 0, top1_agree = 0, clear_disagree = 0;
  double max_diff = 0, sum_diff = 0;
  int64_t values = 0;
  std::vector<double> diffs;
  void add_row(const float* ours, const float* ref, int64_t V, int64_t ref_top1) {
    const int64_t mine = std::max_element(ours, ours + V) - ours;
    std::vector<float> sorted(ref, ref + V);
    std::nth_element(sorted.begin(), sorted.begin() + 1, sorted.end(), std::greater<float>());
    const double margin = static_cast<double>(sorted[0]) - sorted[1];
    ++rows;
    if (mine == ref_top1) ++top1_agree;
    else if (margin > kClearMargin) ++clear_disagree;
    for (int64_t v = 0; v < V; ++v) {
      const double d = std::fabs(static_cast<double>(ours[v]) - ref[v]);
      EXPECT_TRUE(std::isfinite(ours[v])) << "logit " << v;
      max_diff = std::max(max_diff, d);
      sum_diff += d;
      diffs.push_back(d);
      ++values;
    }
  }
  void add_top1(const float* ours, int64_t V, int64_t ref_top1) {
    ++rows;
    if (std::max_element(ours, ours + V) - ours == ref_top1) ++top1_agree;
  }
  double quantile(double q) {
    if (diffs.empty()) return 0;
    std::sort(diffs.begin(), diffs.end());
    return diffs[static_cast<size_t>(q * static_cast<double>(diffs.size() - 1))];
  }
};

void check_golden(const std::string& name, Device dev) {
  const Golden g = read_golden(name);
  auto lm = model::load_causal_lm(test::glm5_tiny_dir(), dev);
  const int64_t V = lm->config().vocab_size, T = static_cast<int64_t>(g.prompt.size());
  const int64_t K = g.prefill_logits.size(0), N = static_cast<int64_t>(g.decode_ids.size());

  const int id = lm->add_request();
  model::ForwardBatch b;
  for (int64_t t = 0; t < T; ++t) {
    b.token_ids.push_back(g.prompt[t]);
    b.request.push_back(id);
    b.positions.push_back(t);
  }
  const Tensor logits = lm->forward(b, true);
  ASSERT_EQ(logits.shape(), (Shape{T, V}));

  Agreement top1_all, prefill, decode;
  for (int64_t t = 0; t < T; ++t) top1_all.add_top1(logits.data<float>() + t * V, V, g.prefill_top1[t]);
  for (int64_t i = 0; i < K; ++i)
    prefill.add_row(logits.data<float>() + (T - K + i) * V, g.prefill_logits.data<float>() + i * V, V,
                    g.prefill_top1[T - K + i]);
  // Decode: feed transformers' greedy tokens (teacher forcing keeps the rows comparable).
  for (int64_t i = 1; i < N; ++i) {
    model::ForwardBatch d{{g.decode_ids[i - 1]}, {id}, {T + i - 1}};
    const Tensor row = lm->forward(d);
    ASSERT_EQ(row.shape(), (Shape{1, V}));
    decode.add_row(row.data<float>(), g.decode_logits.data<float>() + i * V, V, g.decode_ids[i]);
  }
  lm->free_request(id);

  std::printf("[glm5 golden %s on %s] prefill top-1 %d/%d positions; last %lld rows: top-1 %d/%d, |diff| max %.4f "
              "mean %.5f p99 %.4f; decode %lld steps: top-1 %d/%d, |diff| max %.4f mean %.5f p99 %.4f\n",
              name.c_str(), dev.str().c_str(), top1_all.top1_agree, top1_all.rows, static_cast<long long>(K),
              prefill.top1_agree, prefill.rows, prefill.max_diff, prefill.sum_diff / prefill.values,
              prefill.quantile(0.99), static_cast<long long>(N - 1), decode.top1_agree, decode.rows, decode.max_diff,
              decode.sum_diff / decode.values, decode.quantile(0.99));

  // Top-1: all clear rows agree; at most 2 % of all rows (prompt positions + decode steps) differ.
  EXPECT_EQ(prefill.clear_disagree, 0);
  EXPECT_EQ(decode.clear_disagree, 0);
  const int rows = top1_all.rows + decode.rows, agree = top1_all.top1_agree + decode.top1_agree;
  EXPECT_GE(agree, rows - std::max(1, rows / 50)) << agree << " of " << rows << " rows agree on top-1";
  EXPECT_LT(prefill.max_diff, kMaxTol);
  EXPECT_LT(decode.max_diff, kMaxTol);
  EXPECT_LT(prefill.sum_diff / prefill.values, kMeanTol);
  EXPECT_LT(decode.sum_diff / decode.values, kMeanTol);
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
