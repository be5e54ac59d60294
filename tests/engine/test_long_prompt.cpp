// A long prompt on the tiny GLM-5.1 and DeepSeek-V4 checkpoints (CPU): prefilled in one pass and
// in chunks of several sizes (ragged, not multiples of the page, the V4 compressor ratios 4 and
// 128 or the sliding window), it gives the same logits at the prompt's last token and over a few
// greedy decode steps. 1100 tokens cross 8 HCA windows, 275 CSA entries (far more than the tiny
// indexer's top-k, so its choice matters), the sliding window many times, and 1100 GLM indexer
// keys; kept this short for CI's two cores (about 2 minutes). The CPU forwards compute every row
// from its own request's state only, so the bound is tight (1e-5 absolute on the logits), not a
// tolerance for reordering.
#include <gtest/gtest.h>

#include <cmath>

#include <fmt/format.h>

#include "dsa/engine/session.h"
#include "engine_models.h"

namespace dsa::engine::test {
namespace {

class LongPrompt : public ::testing::TestWithParam<std::string> {};

// Logits of the last prompt token, then of each of `decode` greedy steps, as rows of one tensor.
Tensor run(model::CausalLM& lm, const std::vector<int32_t>& prompt, const std::vector<int64_t>& chunks, int decode) {
  SessionOptions so;
  so.max_step_tokens = 4096;
  so.kv_blocks = 256;
  Session s(lm, so);
  const int64_t req = s.add_request();
  const int64_t V = lm.config().vocab_size, n = static_cast<int64_t>(prompt.size());
  Tensor rows = Tensor::empty({decode + 1, V}, DType::F32);
  int64_t at = 0;
  Tensor last;
  for (size_t i = 0; at < n; ++i) {
    const int64_t len = std::min(n - at, i < chunks.size() ? chunks[i] : chunks.back());
    last = s.forward(ForwardBatch::of(req, {prompt.begin() + at, prompt.begin() + at + len}, at));
    at += len;
  }
  rows.select(0, 0).copy_from(last.select(0, 0));
  for (int d = 0; d < decode; ++d) {
    const float* r = rows.select(0, d).data<float>();
    const auto next = static_cast<int32_t>(std::max_element(r, r + V) - r);
    const Tensor l = s.forward(ForwardBatch::of(req, {next}, n + d));
    rows.select(0, d + 1).copy_from(l.select(0, 0));
  }
  s.free_request(req);
  return rows;
}

TEST_P(LongPrompt, ChunkedPrefillEqualsOnePass) {
  auto lm = load_tiny_lm(GetParam());
  const std::vector<int32_t> prompt = random_prompts({1100}, lm->config().vocab_size, 17)[0];
  const Tensor whole = run(*lm, prompt, {1100}, 3);
  for (const std::vector<int64_t>& chunks :
       std::vector<std::vector<int64_t>>{{333}, {1, 127, 128, 4, 500}}) {
    const Tensor got = run(*lm, prompt, chunks, 3);
    double worst = 0;
    for (int64_t i = 0; i < whole.numel(); ++i) {
      const float a = got.data<float>()[i], b = whole.data<float>()[i];
      ASSERT_TRUE(std::isfinite(a)) << "element " << i << " is " << a;
      worst = std::max(worst, static_cast<double>(std::abs(a - b)));
    }
    EXPECT_LE(worst, 1e-5) << GetParam() << ": chunks " << fmt::format("{}", fmt::join(chunks, ","))
                           << " move the logits by up to " << worst;
  }
}

INSTANTIATE_TEST_SUITE_P(Tiny, LongPrompt, ::testing::Values("glm_moe_dsa", "deepseek_v4"));

}  // namespace
}  // namespace dsa::engine::test
