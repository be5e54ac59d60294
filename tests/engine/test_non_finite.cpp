// A non-finite logit (NaN / Inf: broken weights or arithmetic) fails its own request with an
// error naming it, instead of sampling garbage (argmax of NaNs used to give token 0); the other
// requests of the batch run on unchanged. The model is the tiny GLM wrapped so that one request's
// logits rows come back NaN or infinite (the runner's sampler reports such a row).
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
  kv::KvRequirements kv_requirements() const override { return inner_->kv_requirements(); }
  size_t weight_bytes() const override { return inner_->weight_bytes(); }
  std::vector<size_t> layer_weight_bytes() const override { return inner_->layer_weight_bytes(); }
  void reserve(int64_t max_tokens, int max_requests) override { inner_->reserve(max_tokens, max_requests); }
  // CPU only (the metadata is read on the host): a request whose first prompt token is `marker`
  // gets `value` at id 7 in each of its logits rows.
  void forward(const model::StepInputs& in, const Tensor& logits) override {
    inner_->forward(in, logits);
    const kv::BatchMetadata& m = *in.meta;
    for (int64_t t = 0; t < m.num_tokens(); ++t)
      if (m.positions.data<int32_t>()[t] == 0 && m.token_ids.data<int32_t>()[t] == marker)
        poisoned.insert(m.request_ids[static_cast<size_t>(m.token_req.data<int32_t>()[t])]);
    for (int64_t r = 0; r < in.logit_rows.size(0); ++r) {
      const int32_t t = in.logit_rows.data<int32_t>()[r];
      if (poisoned.count(m.request_ids[static_cast<size_t>(m.token_req.data<int32_t>()[t])]))
        logits.data<float>()[r * logits.size(1) + 7] = value;
    }
  }
  int32_t marker = -1;             // a request whose first prompt token is this one gets `value` at id 7
  std::set<kv::RequestId> poisoned;  // its KV request id(s)
  float value = NAN;

 private:
  std::unique_ptr<model::CausalLM> inner_;
};

TEST(EngineNonFinite, OnlyTheAffectedRequestFails) {
  // -inf is not in the list: the sampler takes it as a masked id (a row is broken only when
  // every id is -inf).
  for (float bad : {NAN, INFINITY}) {
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
    EXPECT_EQ(got[1].finish, FinishReason::Length);
    EXPECT_EQ(got[1].tokens, alone);
  }
}

}  // namespace
}  // namespace dsa::engine::test
