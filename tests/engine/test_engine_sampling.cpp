// The engine's host sampling hooks on the tiny GLM-5.1 checkpoint (CPU): logprobs and prompt
// logprobs are the log-softmax of the model's logits (computed here from direct forwards, in
// double), penalties / logit_bias / min_tokens give the tokens of a reference greedy loop that
// applies them with its own code, and the KV capacity queries (can_ever_fit, kv_usage) follow
// the pages.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>

#include "dsa/engine/engine.h"
#include "dsa/engine/sampler.h"
#include "dsa/engine/session.h"
#include "engine_models.h"

namespace dsa::engine::test {
namespace {

model::CausalLM& glm() {
  static std::unique_ptr<model::CausalLM> m = load_tiny_lm("glm_moe_dsa");
  return *m;
}

std::vector<double> log_softmax(const float* row, int64_t V) {
  double mx = -INFINITY, sum = 0;
  for (int64_t i = 0; i < V; ++i) mx = std::max(mx, static_cast<double>(row[i]));
  for (int64_t i = 0; i < V; ++i) sum += std::exp(static_cast<double>(row[i]) - mx);
  std::vector<double> out(static_cast<size_t>(V));
  for (int64_t i = 0; i < V; ++i) out[static_cast<size_t>(i)] = static_cast<double>(row[i]) - mx - std::log(sum);
  return out;
}

// A direct loop: prefill in one forward (every row), then one forward per token; `pick` chooses
// each token from the raw row and the tokens so far. Returns the tokens and every raw row used.
struct Direct {
  std::vector<int32_t> tokens;
  std::vector<std::vector<float>> prompt_rows;  // [prompt_len][V]
  std::vector<std::vector<float>> rows;         // [generated][V]: the row each token came from
};
Direct run_direct(model::CausalLM& lm, const std::vector<int32_t>& prompt, int64_t n,
                  const std::function<int32_t(const std::vector<float>&, const std::vector<int32_t>&)>& pick) {
  const int64_t V = lm.config().vocab_size;
  Direct d;
  Session session(lm);
  const kv::RequestId id = session.add_request();
  const ForwardBatch b = ForwardBatch::of(id, prompt);
  const Tensor all = session.forward(b, true);
  for (size_t i = 0; i < prompt.size(); ++i)
    d.prompt_rows.emplace_back(all.data<float>() + i * V, all.data<float>() + (i + 1) * V);
  std::vector<float> row = d.prompt_rows.back();
  for (int64_t t = 0; t < n; ++t) {
    d.rows.push_back(row);
    d.tokens.push_back(pick(row, d.tokens));
    if (t + 1 == n) break;
    ForwardBatch s{{d.tokens.back()}, {id}, {static_cast<int64_t>(prompt.size() + d.tokens.size() - 1)}};
    const Tensor l = session.forward(s);
    row.assign(l.data<float>(), l.data<float>() + V);
  }
  session.free_request(id);
  return d;
}

int32_t argmax(const std::vector<float>& row) {
  return static_cast<int32_t>(std::max_element(row.begin(), row.end()) - row.begin());
}

TEST(EngineSampling, LogprobsAreTheLogSoftmaxOfTheLogits) {
  model::CausalLM& lm = glm();
  const int64_t V = lm.config().vocab_size;
  const auto prompt = random_prompts({21}, V, 31)[0];  // > one prefill chunk of 16
  const Direct d = run_direct(lm, prompt, 5, [](const std::vector<float>& r, const auto&) { return argmax(r); });
  EngineOptions eo;
  eo.max_prefill_chunk = 16;
  Engine e(lm, eo);
  SamplingParams p;
  p.max_tokens = 5;
  p.logprobs = 3;
  p.prompt_logprobs = 2;
  p.ignore_eos = true;
  e.add_request(prompt, p);
  std::vector<TokenLogprob> got, prompt_got;
  std::vector<int32_t> tokens;
  while (e.has_unfinished())
    for (StepOutput& o : e.step()) {
      ASSERT_EQ(o.logprobs.size(), o.new_tokens.size());
      tokens.insert(tokens.end(), o.new_tokens.begin(), o.new_tokens.end());
      got.insert(got.end(), o.logprobs.begin(), o.logprobs.end());
      if (!o.prompt_logprobs.empty()) {
        EXPECT_TRUE(prompt_got.empty()) << "prompt logprobs reported twice";
        prompt_got = o.prompt_logprobs;
      }
    }
  EXPECT_EQ(tokens, d.tokens);
  ASSERT_EQ(got.size(), 5u);
  for (size_t t = 0; t < got.size(); ++t) {
    const auto ref = log_softmax(d.rows[t].data(), V);
    EXPECT_EQ(got[t].token, d.tokens[t]);
    EXPECT_NEAR(got[t].logprob, ref[static_cast<size_t>(d.tokens[t])], 1e-4) << t;
    ASSERT_EQ(got[t].top.size(), 3u);
    EXPECT_EQ(got[t].top[0].first, d.tokens[t]);  // greedy: the chosen token is the most likely
    std::vector<double> sorted = ref;
    std::sort(sorted.begin(), sorted.end(), std::greater<>());
    for (size_t j = 0; j < 3; ++j) EXPECT_NEAR(got[t].top[j].second, sorted[j], 1e-4);
  }
  ASSERT_EQ(prompt_got.size(), prompt.size() - 1);
  for (size_t i = 0; i + 1 < prompt.size(); ++i) {
    const auto ref = log_softmax(d.prompt_rows[i].data(), V);
    EXPECT_EQ(prompt_got[i].token, prompt[i + 1]);
    EXPECT_NEAR(prompt_got[i].logprob, ref[static_cast<size_t>(prompt[i + 1])], 1e-4) << i;
    ASSERT_EQ(prompt_got[i].top.size(), 2u);
    EXPECT_NEAR(prompt_got[i].top[0].second, *std::max_element(ref.begin(), ref.end()), 1e-4);
  }
}

// The reference applies the rules of sampling_params.h with its own code (counts by std::count,
// membership by std::find) and picks the argmax.
TEST(EngineSampling, PenaltiesBiasAndMinTokensMatchAReferenceLoop) {
  model::CausalLM& lm = glm();
  const int64_t V = lm.config().vocab_size;
  const auto prompt = random_prompts({12}, V, 41)[0];
  SamplingParams p;
  p.max_tokens = 12;
  p.repetition_penalty = 1.4;
  p.frequency_penalty = 0.6;
  p.presence_penalty = 0.3;
  p.min_tokens = 4;
  p.stop_token_ids = {argmax(run_direct(lm, prompt, 1, [](const auto& r, const auto&) { return argmax(r); }).rows[0])};
  p.logit_bias = {{7, 2.5f}, {9, -100.f}};
  const std::vector<int32_t> eos{1};
  auto pick = [&](const std::vector<float>& raw, const std::vector<int32_t>& out) {
    std::vector<float> l = raw;
    for (int64_t id = 0; id < V; ++id) {
      float& x = l[static_cast<size_t>(id)];
      for (const auto& [b, v] : p.logit_bias)
        if (b == id) x += v;
      const bool stopper = std::find(p.stop_token_ids.begin(), p.stop_token_ids.end(), id) != p.stop_token_ids.end() ||
                           std::find(eos.begin(), eos.end(), id) != eos.end();
      if (stopper && static_cast<int64_t>(out.size()) < p.min_tokens) x = -std::numeric_limits<float>::infinity();
      const bool seen = std::find(prompt.begin(), prompt.end(), id) != prompt.end() ||
                        std::find(out.begin(), out.end(), id) != out.end();
      if (seen) x = x > 0 ? x / static_cast<float>(p.repetition_penalty) : x * static_cast<float>(p.repetition_penalty);
      const auto n = std::count(out.begin(), out.end(), static_cast<int32_t>(id));
      x -= static_cast<float>(p.frequency_penalty * static_cast<double>(n) + (n > 0 ? p.presence_penalty : 0.0));
    }
    return argmax(l);
  };
  Direct d = run_direct(lm, prompt, p.max_tokens, pick);
  // The reference stops as the engine does: at a stop id or eos (kept), after min_tokens.
  for (size_t t = 0; t < d.tokens.size(); ++t) {
    const int32_t tok = d.tokens[t];
    if (tok == 1 || tok == p.stop_token_ids[0]) {
      d.tokens.resize(t + 1);
      break;
    }
  }
  EngineOptions eo;
  eo.eos_token_ids = eos;
  Engine e(lm, eo);
  const auto got = e.generate({prompt}, {p});
  EXPECT_EQ(got[0].tokens, d.tokens);
  EXPECT_GE(got[0].tokens.size(), 4u) << "min_tokens";
  // The penalties changed something (else this test would not test them).
  Engine plain(lm, eo);
  SamplingParams g;
  g.max_tokens = p.max_tokens;
  g.ignore_eos = true;
  EXPECT_NE(plain.generate({prompt}, {g})[0].tokens, got[0].tokens);
}

TEST(EngineSampling, CanEverFitAndKvUsage) {
  auto lm = load_tiny_lm("glm_moe_dsa");
  EngineOptions eo;
  eo.kv_blocks = 2;  // 128 tokens
  eo.max_model_len = 128;
  Engine e(*lm, eo);
  EXPECT_TRUE(e.can_ever_fit(128));
  EXPECT_FALSE(e.can_ever_fit(129));
  EXPECT_FALSE(e.can_ever_fit(1001));
  auto usage = e.kv_usage();
  ASSERT_EQ(usage.size(), 1u);
  EXPECT_EQ(usage[0].group, "tokens");
  EXPECT_EQ(usage[0].total_pages, 2);
  EXPECT_EQ(usage[0].used_pages, 0);
  SamplingParams p;
  p.max_tokens = 3;
  e.add_request(random_prompts({70}, lm->config().vocab_size, 3)[0], p);
  e.step();  // the whole prompt (70 <= 512 tokens a step): 2 pages
  EXPECT_EQ(e.kv_usage()[0].used_pages, 2);
  while (e.has_unfinished()) e.step();
  EXPECT_EQ(e.kv_usage()[0].used_pages, 0);
}

}  // namespace
}  // namespace dsa::engine::test
