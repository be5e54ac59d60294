// A non-finite logit (NaN / Inf: broken weights or arithmetic) fails its own request with an
// error naming it, instead of sampling garbage (argmax of NaNs used to give token 0); the other
// requests of the batch run on unchanged. The model is the tiny GLM wrapped so that one request's
// logits rows come back NaN.
#include <algorithm>
#include <cmath>
#include <set>

#include <gtest/gtest.h>

#include "dsa/engine/engine.h"
#include "engine_models.h"

namespace dsa::engine::test {
namespace {

class PoisonedLM : public model::CausalLM {
 public:
  explicit PoisonedLM(std::unique_ptr<model::CausalLM> inner) : inner_(std::move(inner)) {}
  const model::ModelConfig& config() const override { return inner_->config(); }
  Device device() const override { return inner_->device(); }
  int add_request() override { return inner_->add_request(); }
  void free_request(int id) override { inner_->free_request(id); }
  Tensor forward(const model::ForwardBatch& b, bool all_logits) override {
    Tensor logits = inner_->forward(b, all_logits);
    for (size_t i = 0; i < b.token_ids.size(); ++i)
      if (b.positions[i] == 0 && b.token_ids[i] == marker) poisoned.insert(b.request[i]);
    std::vector<int32_t> order;  // requests in order of first appearance: one row each
    for (int32_t r : b.request)
      if (std::find(order.begin(), order.end(), r) == order.end()) order.push_back(r);
    for (size_t i = 0; i < order.size(); ++i)
      if (poisoned.count(order[i]) && !all_logits) logits.data<float>()[i * logits.size(1) + 7] = value;
    return logits;
  }
  int32_t marker = -1;          // a request whose first prompt token is this one gets `value` at id 7
  std::set<int32_t> poisoned;   // its model request id(s)
  float value = NAN;

 private:
  std::unique_ptr<model::CausalLM> inner_;
};

TEST(EngineNonFinite, OnlyTheAffectedRequestFails) {
  for (float bad : {NAN, INFINITY, -INFINITY}) {
    PoisonedLM lm(load_tiny_lm("glm_moe_dsa"));
    const auto prompts = random_prompts({9, 12}, lm.config().vocab_size, 5);
    SamplingParams p;
    p.max_tokens = 4;
    std::vector<int32_t> alone;
    {
      Engine e(lm);
      alone = e.generate({prompts[1]}, {p})[0].tokens;
    }
    ASSERT_NE(prompts[0][0], prompts[1][0]);
    Engine e(lm);
    lm.marker = prompts[0][0];
    lm.value = bad;
    const auto got = e.generate(prompts, {p});
    EXPECT_EQ(got[0].finish, FinishReason::Error);
    EXPECT_TRUE(got[0].tokens.empty());
    EXPECT_NE(got[0].error.find("non-finite logit"), std::string::npos) << got[0].error;
    EXPECT_NE(got[0].error.find("token id 7"), std::string::npos) << got[0].error;
    EXPECT_EQ(got[1].finish, FinishReason::Length);
    EXPECT_EQ(got[1].tokens, alone);
  }
}

}  // namespace
}  // namespace dsa::engine::test
