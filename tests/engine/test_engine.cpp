// Engine (continuous batching) on the tiny GLM-5.1 and DeepSeek-V4 checkpoints on the CPU:
// concurrent requests give exactly the tokens each gives alone (the CPU forwards compute each
// token from its own request's state only, so the comparison is exact, no tolerance), chunked
// prefill sizes change nothing, seeded sampling reproduces, stop ids / eos / max_tokens finish
// requests, aborts free them, and an exhausted KV cache preempts instead of failing.
#include <gtest/gtest.h>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "dsa/core/error.h"
#include "dsa/engine/engine.h"
#include "engine_models.h"

namespace dsa::engine::test {
namespace {

class EngineTest : public ::testing::TestWithParam<std::string> {
 protected:
  static model::CausalLM& lm() {
    static std::map<std::string, std::unique_ptr<model::CausalLM>> models;
    auto& m = models[GetParam()];
    if (!m) m = load_tiny_lm(GetParam());
    return *m;
  }
  int64_t vocab() { return lm().config().vocab_size; }
};

SamplingParams greedy(int64_t max_tokens) {
  SamplingParams p;
  p.max_tokens = max_tokens;
  return p;
}

TEST_P(EngineTest, SingleRequestMatchesDirectGreedy) {
  const auto prompts = random_prompts({13}, vocab(), 11);
  const std::vector<int32_t> want = greedy_direct(lm(), prompts[0], 6);
  Engine e(lm());
  const auto got = e.generate(prompts, {greedy(6)});
  EXPECT_EQ(got[0].tokens, want);
  EXPECT_EQ(got[0].finish, FinishReason::Length);
  EXPECT_FALSE(e.has_unfinished());
}

TEST_P(EngineTest, ConcurrentGreedyEqualsAlone) {
  const std::vector<int64_t> lengths{1, 5, 17, 40, 70, 3};
  const auto prompts = random_prompts(lengths, vocab(), 7);
  std::vector<std::vector<int32_t>> alone;
  for (const auto& p : prompts) {
    Engine e(lm());
    alone.push_back(e.generate({p}, {greedy(7)})[0].tokens);
    ASSERT_EQ(alone.back().size(), 7u);
  }
  // Several requests per step, prompts split into chunks, decodes and prefills mixed.
  EngineOptions o;
  o.max_running = 4;  // the last two wait for the first to finish
  o.max_step_tokens = 24;
  o.max_prefill_chunk = 9;
  Engine e(lm(), o);
  const auto got = e.generate(prompts, {greedy(7)});
  for (size_t i = 0; i < prompts.size(); ++i) {
    EXPECT_EQ(got[i].tokens, alone[i]) << "prompt " << i << " (" << lengths[i] << " tokens)";
    EXPECT_EQ(got[i].finish, FinishReason::Length);
  }
}

TEST_P(EngineTest, ChunkSizesDoNotChangeTokens) {
  const auto prompts = random_prompts({33, 8, 21}, vocab(), 5);
  std::vector<std::vector<int32_t>> first;
  for (auto [step, chunk] : std::vector<std::pair<int64_t, int64_t>>{{512, 0}, {16, 0}, {8, 1}, {40, 7}, {5, 3}}) {
    EngineOptions o;
    o.max_step_tokens = step;
    o.max_running = 3;
    o.max_prefill_chunk = chunk;
    Engine e(lm(), o);
    const auto got = e.generate(prompts, {greedy(5)});
    std::vector<std::vector<int32_t>> toks;
    for (const auto& c : got) toks.push_back(c.tokens);
    if (first.empty())
      first = toks;
    else
      EXPECT_EQ(toks, first) << "max_step_tokens " << step << " max_prefill_chunk " << chunk;
  }
}

TEST_P(EngineTest, SeededSamplingReproduces) {
  const auto prompts = random_prompts({9, 15}, vocab(), 3);
  SamplingParams p;
  p.max_tokens = 12;
  p.temperature = 1.3;
  p.top_k = 50;
  p.top_p = 0.95;
  p.seed = 1234;
  Engine a(lm());
  const auto x = a.generate({prompts[0]}, {p});
  // Same seed, now batched beside another (differently seeded) request: same tokens.
  SamplingParams q = p;
  q.seed = 99;
  EngineOptions o;
  o.max_prefill_chunk = 4;
  Engine b(lm(), o);
  const auto y = b.generate(prompts, {p, q});
  EXPECT_EQ(y[0].tokens, x[0].tokens);
  ASSERT_EQ(x[0].tokens.size(), 12u);
  // Another seed gives another sequence (12 draws at temperature 1.3 over 50 candidates).
  Engine c(lm());
  const auto z = c.generate({prompts[0]}, {q});
  EXPECT_NE(z[0].tokens, x[0].tokens);
  // Sampling differs from greedy.
  Engine g(lm());
  EXPECT_NE(g.generate({prompts[0]}, {greedy(12)})[0].tokens, x[0].tokens);
}

TEST_P(EngineTest, StopIdsEosAndMaxTokens) {
  const auto prompts = random_prompts({10}, vocab(), 21);
  Engine e0(lm());
  const std::vector<int32_t> full = e0.generate(prompts, {greedy(10)})[0].tokens;
  ASSERT_EQ(full.size(), 10u);
  const int32_t stop = full[3];
  const size_t first = static_cast<size_t>(std::find(full.begin(), full.end(), stop) - full.begin());
  const std::vector<int32_t> want(full.begin(), full.begin() + static_cast<std::ptrdiff_t>(first) + 1);

  SamplingParams p = greedy(10);
  p.stop_token_ids = {stop};
  Engine e1(lm());
  auto c = e1.generate(prompts, {p})[0];
  EXPECT_EQ(c.tokens, want);
  EXPECT_EQ(c.finish, FinishReason::Stop);

  // The same token as the engine's eos; ignore_eos runs to max_tokens.
  EngineOptions o;
  o.eos_token_ids = {stop};
  Engine e2(lm(), o);
  c = e2.generate(prompts, {greedy(10)})[0];
  EXPECT_EQ(c.tokens, want);
  EXPECT_EQ(c.finish, FinishReason::Stop);
  SamplingParams ig = greedy(10);
  ig.ignore_eos = true;
  c = e2.generate(prompts, {ig})[0];
  EXPECT_EQ(c.tokens, full);
  EXPECT_EQ(c.finish, FinishReason::Length);

  for (int64_t n : {1, 2, 5}) {
    Engine e(lm());
    c = e.generate(prompts, {greedy(n)})[0];
    EXPECT_EQ(c.tokens, std::vector<int32_t>(full.begin(), full.begin() + n));
    EXPECT_EQ(c.finish, FinishReason::Length);
  }
}

TEST_P(EngineTest, AbortFreesAndOthersContinue) {
  const auto prompts = random_prompts({12, 6}, vocab(), 8);
  Engine alone(lm());
  const auto want = alone.generate({prompts[1]}, {greedy(6)})[0].tokens;

  Engine e(lm());
  const kv::RequestId a = e.add_request(prompts[0], greedy(50));
  const kv::RequestId b = e.add_request(prompts[1], greedy(6));
  std::vector<int32_t> got;
  bool saw_abort = false, saw_b = false;
  for (int i = 0; i < 2; ++i)
    for (const StepOutput& o : e.step())
      if (o.id == b) got.insert(got.end(), o.new_tokens.begin(), o.new_tokens.end());
  EXPECT_EQ(e.num_running(), 2u);
  e.abort(a);
  EXPECT_EQ(e.num_running(), 1u);
  while (e.has_unfinished())
    for (const StepOutput& o : e.step()) {
      if (o.id == a) {
        EXPECT_EQ(o.finish, FinishReason::Abort);
        EXPECT_TRUE(o.new_tokens.empty());
        saw_abort = true;
      }
      if (o.id == b) {
        got.insert(got.end(), o.new_tokens.begin(), o.new_tokens.end());
        if (o.finished()) saw_b = true;
      }
    }
  EXPECT_TRUE(saw_abort);
  EXPECT_TRUE(saw_b);
  EXPECT_EQ(got, want);
  e.abort(a);  // unknown now: ignored
  EXPECT_FALSE(e.has_unfinished());
}

TEST_P(EngineTest, RejectsBadRequests) {
  Engine e(lm());
  const int64_t V = vocab();
  auto expect_error = [&](std::vector<int32_t> prompt, SamplingParams p, const char* what) {
    try {
      e.add_request(prompt, p);
      ADD_FAILURE() << "accepted: " << what;
    } catch (const Error& err) {
      EXPECT_NE(std::string(err.what()).find(what), std::string::npos) << err.what();
    }
  };
  expect_error({}, greedy(1), "empty");
  expect_error({1, static_cast<int32_t>(V)}, greedy(1), "outside the vocabulary");
  expect_error({-1}, greedy(1), "outside the vocabulary");
  expect_error({1}, greedy(0), "max_tokens");
  SamplingParams t = greedy(1);
  t.temperature = -1;
  expect_error({1}, t, "temperature");
  t = greedy(1);
  t.top_p = 0;
  expect_error({1}, t, "top_p");
  t = greedy(1);
  t.stop_token_ids = {static_cast<int32_t>(V)};
  expect_error({1}, t, "stop_token_ids");
  expect_error(std::vector<int32_t>(static_cast<size_t>(e.max_model_len()), 2), greedy(1), "maximum context length");
  EXPECT_FALSE(e.has_unfinished());
  EngineOptions bad;
  bad.max_running = 8;
  bad.max_step_tokens = 4;
  EXPECT_THROW(Engine(lm(), bad), Error);
}

INSTANTIATE_TEST_SUITE_P(Tiny, EngineTest, ::testing::Values("glm_moe_dsa", "deepseek_v4"),
                         [](const auto& info) { return info.param == "glm_moe_dsa" ? "Glm5" : "DeepseekV4"; });

// A GLM model with 2 KV pages (128 tokens): requests that together need more wait or are
// preempted and recomputed, giving the same tokens; one that could never fit is refused when it
// is added (a capacity check, not a failed step), and the others keep running.
TEST(EngineKv, PreemptsWhenTheCacheIsFull) {
  auto lm = load_tiny_lm("glm_moe_dsa");
  const auto prompts = random_prompts({50, 45, 60}, lm->config().vocab_size, 4);
  std::vector<std::vector<int32_t>> alone;
  for (const auto& p : prompts) alone.push_back(greedy_direct(*lm, p, 20));
  EngineOptions o;
  o.kv_blocks = 2;
  o.max_model_len = 128;
  Engine e(*lm, o);
  EXPECT_EQ(e.capacity_tokens(), 128);
  const auto got = e.generate(prompts, {greedy(20)});
  for (size_t i = 0; i < prompts.size(); ++i) {
    EXPECT_EQ(got[i].tokens, alone[i]) << "prompt " << i;
    EXPECT_EQ(got[i].finish, FinishReason::Length);
  }
  EXPECT_GT(e.num_preemptions(), 0);
  EXPECT_EQ(e.kv_usage()[0].used_pages, 0);  // preemption and completion free exactly what was held
  // 120 + 20 tokens > 128: refused at admission with a clear error; a small request completes.
  const auto big = random_prompts({120, 5}, lm->config().vocab_size, 6);
  try {
    e.add_request(big[0], greedy(20));
    ADD_FAILURE() << "a request larger than the whole KV cache was accepted";
  } catch (const Error& err) {
    EXPECT_NE(std::string(err.what()).find("exceed"), std::string::npos) << err.what();
  }
  const auto res = e.generate({big[1]}, {greedy(3)});
  EXPECT_EQ(res[0].finish, FinishReason::Length);
  EXPECT_EQ(res[0].tokens, greedy_direct(*lm, big[1], 3));
  EXPECT_FALSE(e.has_unfinished());
  // An engine whose cache cannot hold one request of max_model_len refuses to start.
  o.max_model_len = 129;
  try {
    Engine too_small(*lm, o);
    ADD_FAILURE() << "an engine started whose KV cache cannot hold one max_model_len request";
  } catch (const Error& err) {
    EXPECT_NE(std::string(err.what()).find("cannot hold one request of max_model_len 129"), std::string::npos)
        << err.what();
  }
}

// max_running bounds the requests holding KV memory for both models; the rest wait, and every
// request gives the tokens it gives alone.
TEST_P(EngineTest, MaxRunningIsHonoured) {
  const auto prompts = random_prompts(std::vector<int64_t>(10, 3), vocab(), 12);
  EngineOptions o;
  o.max_running = 3;
  o.max_step_tokens = 64;
  Engine e(lm(), o);
  for (size_t i = 0; i < prompts.size(); ++i) e.add_request(prompts[i], greedy(4));
  std::map<uint64_t, std::vector<int32_t>> got;
  size_t most = 0;
  while (e.has_unfinished()) {
    for (const StepOutput& out : e.step()) got[out.id].insert(got[out.id].end(), out.new_tokens.begin(), out.new_tokens.end());
    most = std::max(most, e.num_running());
    EXPECT_LE(e.num_running(), 3u);
    EXPECT_LE(e.kv().num_requests(), 3);
  }
  EXPECT_EQ(most, 3u);
  for (size_t i : {size_t{0}, size_t{9}}) {
    Engine one(lm());
    EXPECT_EQ(got[i], one.generate({prompts[i]}, {greedy(4)})[0].tokens) << "prompt " << i;
  }
}

}  // namespace
}  // namespace dsa::engine::test
