// A long prompt on the tiny GLM-5.1 and DeepSeek-V4 checkpoints (CPU): prefilled in one pass and
// in chunks of several sizes (ragged, not multiples of the page, the V4 compressor ratios 4 and
// 128 or the sliding window), it gives the same logits at the prompt's last token and over a few
// greedy decode steps. 1100 tokens cross 8 HCA windows, 275 CSA entries (far more than the tiny
// indexer's top-k, so its choice matters), the sliding window many times, and 1100 GLM indexer
// keys; kept this short for CI's two cores (about 2 minutes). The CPU forwards compute every row
// from its own request's state only, so the bound is tight (1e-5 absolute on the logits), not a
// tolerance for reordering.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>

#include <unistd.h>

#include <fmt/format.h>

#include "common/testing.h"
#include "dsa/engine/session.h"
#include "dsa/model/checkpoint_tiny.h"
#include "engine_models.h"

namespace dsa::engine::test {
namespace {

class LongPrompt : public ::testing::TestWithParam<std::string> {};

// Logits of the last prompt token, then of each of `decode` greedy steps, as rows of one tensor.
Tensor run(model::CausalLM& lm, const std::vector<int32_t>& prompt, const std::vector<int64_t>& chunks, int decode,
           int64_t kv_blocks = 256, int64_t max_step_tokens = 4096) {
  SessionOptions so;
  so.max_step_tokens = max_step_tokens;
  so.kv_blocks = kv_blocks;
  Session s(lm, so);
  const kv::RequestId req = s.add_request();
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

// On CUDA, 64K tokens (V4: 16K CSA entries, 512 HCA windows; GLM: 64K indexer keys): chunks of
// 8192 against ragged chunks. The CUDA kernels round in bf16 and a GEMM's tactic may change with
// the chunk's token count, so the bound is a fraction of the largest logit, not the CPU's 1e-5;
// the greedy decode steps must agree on their tokens, and every logit must be finite.
TEST_P(LongPrompt, CudaChunkedPrefillAt64KTokens) {
  DSA_REQUIRE_CUDA();
  // The tiny checkpoint with a context above 64K (its own config says 4096 / 65536 positions).
  const std::filesystem::path dir = std::filesystem::temp_directory_path() /
                                    ("dsa_long_" + GetParam() + "_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  TinyOptions t;
  t.arch = GetParam();
  t.seed = 1;
  make_tiny_checkpoint(t, dir.string());
  set_config_fields(dir.string(), {{"max_position_embeddings", 131072}});
  auto lm = model::load_causal_lm(dir.string(), Device::cuda(0), {.progress = false});
  constexpr int64_t n = 65536;
  std::printf("prompt seed 23, %lld tokens\n", static_cast<long long>(n));
  const std::vector<int32_t> prompt = random_prompts({n}, lm->config().vocab_size, 23)[0];
  const int64_t blocks = n / 64 + 64;  // pages of at least 64 tokens
  const Tensor whole = run(*lm, prompt, {8192}, 4, blocks, 8192);
  const Tensor got = run(*lm, prompt, {5000, 1, 3001, 8192, 777}, 4, blocks, 8192);
  const int64_t V = lm->config().vocab_size;
  double worst = 0, scale = 1;
  for (int64_t i = 0; i < whole.numel(); ++i) {
    const float a = got.data<float>()[i], b = whole.data<float>()[i];
    ASSERT_TRUE(std::isfinite(a) && std::isfinite(b)) << "element " << i << ": " << a << " vs " << b;
    worst = std::max(worst, static_cast<double>(std::abs(a - b)));
    scale = std::max(scale, static_cast<double>(std::abs(b)));
  }
  std::printf("%s 64K: max |logit| %.4f, chunkings differ by up to %.6f\n", GetParam().c_str(), scale, worst);
  EXPECT_LE(worst, 0.02 * scale) << GetParam();
  for (int64_t d = 1; d < whole.size(0); ++d) {  // the tokens fed to the decode steps were the same
    const float* a = whole.select(0, d - 1).data<float>();
    const float* b = got.select(0, d - 1).data<float>();
    EXPECT_EQ(std::max_element(a, a + V) - a, std::max_element(b, b + V) - b) << "decode step " << d;
  }
  lm.reset();
  std::filesystem::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(Tiny, LongPrompt, ::testing::Values("glm_moe_dsa", "deepseek_v4"));

}  // namespace
}  // namespace dsa::engine::test
