// Scripted tiny checkpoints (model/scripted_weights.h): after the rewrite, greedy decoding of
// both models follows the given token chain from any prompt that ends with its first token, and
// the chain's logit margin is large (so sampling at temperature 1 follows it too).
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <map>

#include "common/testing.h"
#include "dsa/model/checkpoint_tiny.h"
#include "dsa/engine/session.h"
#include "dsa/model/scripted_weights.h"
#include "engine_models.h"

namespace dsa::engine::test {
namespace {

class ScriptedWeights : public ::testing::TestWithParam<std::string> {};

TEST_P(ScriptedWeights, GreedyDecodingFollowsTheChain) {
  const std::string arch = GetParam();
  const auto dir = std::filesystem::temp_directory_path() / ("dsa_scripted_" + arch + "_" + std::to_string(dsa::test::test_seed()));
  TinyOptions o;
  o.arch = arch;
  o.seed = 3;
  make_tiny_checkpoint(o, dir.string());
  // 7 -> 300 -> 41 -> 5 -> 300 would conflict; a chain of distinct tokens ending at eos 1.
  const std::vector<int32_t> chain = {7, 300, 41, 5, 77, 1};
  std::map<int32_t, int32_t> next;
  for (size_t i = 0; i + 1 < chain.size(); ++i) next[chain[i]] = chain[i + 1];
  model::apply_scripted_weights(dir.string(), next);
  auto lm = model::load_causal_lm(dir.string(), Device::cpu());
  for (const std::vector<int32_t>& prefix : {std::vector<int32_t>{}, std::vector<int32_t>{9, 200, 3}, std::vector<int32_t>{450}}) {
    std::vector<int32_t> prompt = prefix;
    prompt.push_back(7);
    const std::vector<int32_t> got = greedy_direct(*lm, prompt, 5);
    EXPECT_EQ(got, std::vector<int32_t>(chain.begin() + 1, chain.end())) << arch;
  }
  // The margin: the chain token's logit is far above every other one.
  Session session(*lm);
  const kv::RequestId id = session.add_request();
  ForwardBatch b{{300}, {id}, {0}};
  Tensor logits = session.forward(b);
  const float* p = logits.data<float>();
  const int64_t V = lm->config().vocab_size;
  float best_other = -1e30f;
  for (int64_t i = 0; i < V; ++i)
    if (i != 41) best_other = std::max(best_other, p[i]);
  EXPECT_GT(p[41] - best_other, 20.f) << arch;
  session.free_request(id);
  std::filesystem::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(Models, ScriptedWeights, ::testing::Values("glm_moe_dsa", "deepseek_v4"));

}  // namespace
}  // namespace dsa::engine::test
