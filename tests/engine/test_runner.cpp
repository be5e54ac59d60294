// The model runner's contract on CUDA: a decode step of either model makes the host wait exactly
// once, for the one device-to-host copy of the sampled ids (core/cuda_stream.h counts every
// synchronous copy, memset wait and synchronisation). On the CPU and CUDA alike: the engine's
// greedy tokens equal the argmax of the logits a session returns.
#include <gtest/gtest.h>

#include <string>

#include "common/testing.h"
#include "dsa/core/cuda_stream.h"
#include "dsa/engine/engine.h"
#include "dsa/engine/session.h"
#include "engine_models.h"

namespace dsa::engine::test {
namespace {

class RunnerTest : public ::testing::TestWithParam<std::string> {};

TEST_P(RunnerTest, CudaDecodeStepWaitsOnlyForTheSampledIds) {
  DSA_REQUIRE_CUDA();
  auto lm = model::load_causal_lm(tiny_model_dir(GetParam()), Device::cuda(0));
  EngineOptions o;
  o.max_running = 4;
  o.max_step_tokens = 64;
  o.max_model_len = 256;
  o.memory.kv_cache_bytes = size_t{64} << 20;
  Engine e(*lm, o);
  const auto prompts = random_prompts({9, 14, 3}, lm->config().vocab_size, 2);
  SamplingParams p;
  p.max_tokens = 8;
  p.temperature = 0.8;
  p.top_k = 20;
  p.seed = 5;
  for (const auto& pr : prompts) e.add_request(pr, p);
  // Prefill (first step: all three prompts) and one decode step to settle workspaces.
  e.step();
  e.step();
  int decode_steps = 0;
  while (e.has_unfinished()) {
    const cuda_stream::HostWaits before = cuda_stream::host_waits();
    const auto out = e.step();
    const cuda_stream::HostWaits after = cuda_stream::host_waits();
    EXPECT_EQ(after.d2h_copies - before.d2h_copies, 1) << "decode step " << decode_steps;
    EXPECT_EQ(after.h2d_sync - before.h2d_sync, 0) << "decode step " << decode_steps;
    EXPECT_EQ(after.syncs - before.syncs, 0) << "decode step " << decode_steps;
    for (const StepOutput& s : out) EXPECT_NE(s.finish, FinishReason::Error) << s.error;
    ++decode_steps;
  }
  EXPECT_GE(decode_steps, 5);
}

TEST_P(RunnerTest, EngineGreedyEqualsSessionArgmax) {
  auto lm = load_tiny_lm(GetParam());
  const auto prompts = random_prompts({11}, lm->config().vocab_size, 4);
  const std::vector<int32_t> want = greedy_direct(*lm, prompts[0], 6);
  Engine e(*lm);
  SamplingParams p;
  p.max_tokens = 6;
  EXPECT_EQ(e.generate(prompts, {p})[0].tokens, want);
}

INSTANTIATE_TEST_SUITE_P(Tiny, RunnerTest, ::testing::Values("glm_moe_dsa", "deepseek_v4"),
                         [](const auto& info) { return info.param == "glm_moe_dsa" ? "Glm5" : "DeepseekV4"; });

}  // namespace
}  // namespace dsa::engine::test
