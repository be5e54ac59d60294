// Speculative decoding with the MTP layer (docs/speculative-decoding.md) on the tiny GLM-5.1 and
// DeepSeek-V4 checkpoints on the CPU: greedy (and, with exact acceptance, seeded sampled) output
// with N = 1, 2, 3 drafts per step equals the output without drafts, token for token, with several requests per step
// (some without drafts), chunked prefill and a V4 run long enough to cross its compressor
// windows (ratio 4 and 128: 140 generated tokens); the random tiny MTP layers rarely predict
// right, so most drafts are rejected and every rollback path runs; forced drafts that are always accepted or always
// rejected leave the output unchanged (every rollback path, the compressor-state restore
// included, is exact); the verifier and the rollback rule on synthetic inputs; bad input errors.
// Sampled requests under the rejection rule (the default): valid tokens, the same on every run of
// a seed, greedy requests beside them unchanged, and on the predicting scripted checkpoint at a
// temperature that spreads the target's distribution nearly every draft accepted (exact match
// accepts far fewer; a Cuda test repeats this on the GPU). The rule's distribution is checked in
// test_rejection_sampling.cpp.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <map>

#include <unistd.h>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "common/testing.h"
#include "dsa/core/error.h"
#include "dsa/engine/engine.h"
#include "dsa/engine/speculative.h"
#include "dsa/model/checkpoint_tiny.h"
#include "dsa/model/scripted_weights.h"
#include "engine_models.h"

namespace dsa::engine::test {
namespace {

model::CausalLM& tiny(const std::string& arch) {
  static std::map<std::string, std::unique_ptr<model::CausalLM>> models;
  auto& m = models[arch];
  if (!m) m = load_tiny_lm(arch);
  return *m;
}

SamplingParams greedy(int64_t max_tokens) {
  SamplingParams p;
  p.max_tokens = max_tokens;
  p.ignore_eos = true;
  return p;
}

struct Outcome {
  std::vector<std::vector<int32_t>> tokens;
  std::vector<FinishReason> finishes;
  int64_t preemptions = 0;
  SpecStats stats;
};

Outcome generate(model::CausalLM& lm, const std::vector<std::vector<int32_t>>& prompts,
             const std::vector<SamplingParams>& params, EngineOptions o) {
  Engine e(lm, o);
  Outcome r;
  for (const Completion& c : e.generate(prompts, params)) {
    EXPECT_TRUE(c.finish == FinishReason::Length || c.finish == FinishReason::Stop) << c.error;
    r.tokens.push_back(c.tokens);
    r.finishes.push_back(c.finish);
  }
  r.stats = e.spec_stats();
  r.preemptions = e.num_preemptions();
  return r;
}

void print_stats(const std::string& what, const SpecStats& s) {
  std::printf("%s: %lld verify steps, %lld drafted, %lld accepted (%.3f), mean accepted length %.3f, %lld rollbacks\n",
              what.c_str(), static_cast<long long>(s.verify_steps), static_cast<long long>(s.drafted),
              static_cast<long long>(s.accepted), s.acceptance_rate(), s.mean_accepted_length(),
              static_cast<long long>(s.rollbacks));
}

TEST(SpeculativeVerifier, AcceptsTheMatchingPrefixAndEmitsOneMore) {
  const std::vector<int32_t> drafts{5, 6, 7};
  EXPECT_EQ(accepted_prefix(drafts, std::vector<int32_t>{5, 6, 7, 8}), 3);  // all accepted + bonus
  EXPECT_EQ(accepted_prefix(drafts, std::vector<int32_t>{5, 6, 9, 8}), 2);  // third rejected, 9 corrects it
  EXPECT_EQ(accepted_prefix(drafts, std::vector<int32_t>{4, 6, 7, 8}), 0);  // first rejected
  EXPECT_EQ(accepted_prefix(drafts, std::vector<int32_t>{5, -1, 7, 8}), 1);  // a non-finite row stops acceptance
  EXPECT_EQ(accepted_prefix({}, std::vector<int32_t>{3}), 0);
  EXPECT_THROW(accepted_prefix(drafts, std::vector<int32_t>{5, 6, 7}), Error);
}

TEST(SpeculativeVerifier, StateRollbackOnlyWhenAWindowClosesInTheRejectedSpan) {
  std::vector<kv::CacheGroupSpec> groups(3);
  groups[0].ratio = 1;
  groups[1].ratio = 4;
  groups[2].ratio = 128;
  // Positions [keep, end) are forgotten; position p closes a window of m when (p + 1) % m == 0.
  EXPECT_FALSE(rollback_needs_state(groups, 4, 7));   // 4, 5, 6: no close of 4
  EXPECT_TRUE(rollback_needs_state(groups, 4, 8));    // 7 closes
  EXPECT_TRUE(rollback_needs_state(groups, 3, 4));    // 3 closes
  EXPECT_FALSE(rollback_needs_state(groups, 8, 8));   // nothing forgotten
  EXPECT_FALSE(rollback_needs_state({groups[0], groups[2]}, 120, 127));
  EXPECT_TRUE(rollback_needs_state({groups[0], groups[2]}, 120, 128));  // 127 closes a window of 128
  EXPECT_FALSE(rollback_needs_state({groups[0]}, 0, 100));             // GLM: never
}

class SpeculativeTest : public ::testing::TestWithParam<std::string> {
 protected:
  model::CausalLM& lm() { return tiny(GetParam()); }
  int64_t vocab() { return lm().config().vocab_size; }
};

// Several requests in one batch, chunked prefill, one request decoding without drafts.
TEST_P(SpeculativeTest, GreedyOutputEqualsDecodingWithoutDrafts) {
  const auto prompts = random_prompts({20, 9, 31}, vocab(), 3);
  std::vector<SamplingParams> params{greedy(36), greedy(16), greedy(24)};
  params[1].speculative_tokens = 0;  // no drafts for this one
  EngineOptions o;
  o.max_running = 3;
  o.max_step_tokens = 32;
  o.max_prefill_chunk = 8;
  o.log_capacity = false;
  const Outcome base = generate(lm(), prompts, params, o);
  for (int n : {1, 2, 3}) {
    o.speculative_tokens = n;
    const Outcome spec = generate(lm(), prompts, params, o);
    print_stats(fmt::format("{} N={}", GetParam(), n), spec.stats);
    for (size_t i = 0; i < prompts.size(); ++i)
      EXPECT_EQ(spec.tokens[i], base.tokens[i]) << "N = " << n << ", request " << i;
    EXPECT_GT(spec.stats.verify_steps, 0);
    EXPECT_GE(spec.stats.drafted, spec.stats.verify_steps);
  }
}

// 140 generated tokens after a 20-token prompt cross V4's ratio-128 compressor window (and many
// ratio-4 ones) while verifying drafts; a second request joins mid-way.
TEST(SpeculativeLong, DeepseekV4CrossesBothCompressorWindows) {
  model::CausalLM& lm = tiny("deepseek_v4");
  const auto prompts = random_prompts({20, 11}, lm.config().vocab_size, 17);
  const std::vector<SamplingParams> params{greedy(140), greedy(20)};
  EngineOptions o;
  o.max_running = 2;
  o.max_prefill_chunk = 6;
  o.log_capacity = false;
  const Outcome base = generate(lm, prompts, params, o);
  for (int n : {1, 2, 3}) {
    o.speculative_tokens = n;
    const Outcome spec = generate(lm, prompts, params, o);
    print_stats(fmt::format("deepseek_v4 long N={}", n), spec.stats);
    EXPECT_EQ(spec.tokens, base.tokens) << "N = " << n;
    EXPECT_GT(spec.stats.rollbacks, 0);  // compressor state restored at least once
  }
}

// Seeded sampling with exact acceptance: row j of a verification draws with the counter decoding
// without drafts uses for that token, so the sampled output is the same sequence too.
TEST_P(SpeculativeTest, ExactSeededSampledOutputEqualsDecodingWithoutDrafts) {
  const auto prompts = random_prompts({12, 7}, vocab(), 9);
  SamplingParams p = greedy(40);
  p.temperature = 0.8;
  p.top_k = 20;
  p.seed = 1234;
  EngineOptions o;
  o.max_running = 2;
  o.log_capacity = false;
  o.speculative_acceptance = SpecAcceptance::Exact;
  const Outcome base = generate(lm(), prompts, {p}, o);
  for (int n : {1, 2, 3}) {
    o.speculative_tokens = n;
    const Outcome spec = generate(lm(), prompts, {p}, o);
    print_stats(fmt::format("{} sampled exact N={}", GetParam(), n), spec.stats);
    EXPECT_EQ(spec.tokens, base.tokens) << "N = " << n;
    EXPECT_GT(spec.stats.verify_steps, 0);
  }
}

// The rejection rule (default) on sampled requests, N = 1, 2, 3: every token is in the
// vocabulary, each request gets max_tokens, a second run with the same seeds gives the same
// tokens, drafts are verified and counted, and the greedy request of the same batch (argmax match
// in both modes) still gives its output without drafts. Different seeds give different outputs.
TEST_P(SpeculativeTest, RejectionSampledOutputIsValidAndReproducible) {
  const auto prompts = random_prompts({12, 7, 10}, vocab(), 9);
  SamplingParams a = greedy(30);
  a.temperature = 0.8;
  a.top_k = 20;
  a.seed = 1234;
  SamplingParams b = a;
  b.temperature = 1.2;
  b.top_k = 0;
  b.top_p = 0.9;
  b.seed = 99;
  const std::vector<SamplingParams> params{a, b, greedy(30)};
  EngineOptions o;
  o.max_running = 3;
  o.max_prefill_chunk = 5;
  o.log_capacity = false;
  const Outcome base = generate(lm(), prompts, params, o);
  for (int n : {1, 2, 3}) {
    o.speculative_tokens = n;
    const Outcome spec = generate(lm(), prompts, params, o);
    print_stats(fmt::format("{} sampled rejection N={}", GetParam(), n), spec.stats);
    for (size_t i = 0; i < prompts.size(); ++i) {
      ASSERT_EQ(spec.tokens[i].size(), 30u) << "N = " << n << ", request " << i;
      for (int32_t t : spec.tokens[i]) ASSERT_TRUE(t >= 0 && t < vocab()) << t;
    }
    EXPECT_EQ(spec.tokens[2], base.tokens[2]) << "greedy request, N = " << n;
    EXPECT_GT(spec.stats.verify_steps, 0);
    EXPECT_GE(spec.stats.drafted, spec.stats.verify_steps);
    EXPECT_GT(spec.stats.accepted, 0);
    const Outcome again = generate(lm(), prompts, params, o);
    EXPECT_EQ(again.tokens, spec.tokens) << "N = " << n;
    EXPECT_EQ(again.stats.accepted, spec.stats.accepted) << "N = " << n;
    std::vector<SamplingParams> other = params;
    other[0].seed = 1235;
    EXPECT_NE(generate(lm(), prompts, other, o).tokens[0], spec.tokens[0]) << "N = " << n;
  }
}

// Drafts forced to the right tokens are all accepted (mean accepted length N + 1, nothing rolled
// back); drafts forced wrong are all rejected (every step rolls back, the V4 compressor state
// restored where a window closed inside the span). Both give the output without drafts.
TEST_P(SpeculativeTest, ForcedDraftsAllAcceptedOrAllRejectedKeepTheOutput) {
  const auto prompts = random_prompts({15, 6}, vocab(), 21);
  const std::vector<SamplingParams> params{greedy(40), greedy(25)};
  EngineOptions o;
  o.max_running = 2;
  o.max_prefill_chunk = 5;
  o.log_capacity = false;
  const Outcome base = generate(lm(), prompts, params, o);
  const int64_t V = vocab();
  for (bool right : {true, false}) {
    for (int n : {1, 3}) {
      o.speculative_tokens = n;
      o.draft_hook = [&](const Sequence& s, std::vector<int32_t>& d) {
        const std::vector<int32_t>& want = base.tokens.at(s.id);  // ids are given in order from 0
        for (size_t k = 0; k < d.size(); ++k) {
          const size_t g = static_cast<size_t>(s.generated()) + k;  // index of the drafted token in the output
          const int32_t t = g < want.size() ? want[g] : 0;
          d[k] = right ? t : static_cast<int32_t>((t + 1) % V);
        }
      };
      const Outcome spec = generate(lm(), prompts, params, o);
      print_stats(fmt::format("{} forced {} N={}", GetParam(), right ? "right" : "wrong", n), spec.stats);
      EXPECT_EQ(spec.tokens, base.tokens) << (right ? "right" : "wrong") << " drafts, N = " << n;
      ASSERT_GT(spec.stats.drafted, 0);
      if (right) {
        EXPECT_EQ(spec.stats.accepted, spec.stats.drafted);
        EXPECT_EQ(spec.stats.rollbacks, 0);
      } else {
        EXPECT_EQ(spec.stats.accepted, 0);
        if (GetParam() == "deepseek_v4" && n == 3) {
          EXPECT_GT(spec.stats.rollbacks, 0);
        }
      }
    }
  }
}

// The benchmark mode (EngineOptions::benchmark_accept_all_drafts, `dsa bench decode
// --speculative-tokens`): every draft of the random tiny MTP layer is accepted, so every step
// after the first token emits N + 1 tokens per request (the round shape the benchmark times),
// nothing rolls back, and it is off unless asked for.
TEST_P(SpeculativeTest, BenchmarkModeAcceptsEveryDraft) {
  EXPECT_FALSE(EngineOptions{}.benchmark_accept_all_drafts);
  const int n = 2;
  EngineOptions o;
  o.max_running = 2;
  o.log_capacity = false;
  o.speculative_tokens = n;
  o.benchmark_accept_all_drafts = true;
  Engine e(lm(), o);
  const auto prompts = random_prompts({11, 7}, vocab(), 4);
  for (const auto& p : prompts) e.add_request(p, greedy(1 + 5 * (n + 1)));
  std::map<uint64_t, std::vector<size_t>> emitted;  // tokens per step, per request
  while (e.has_unfinished())
    for (const StepOutput& s : e.step())
      if (!s.new_tokens.empty()) emitted[s.id].push_back(s.new_tokens.size());
  ASSERT_EQ(emitted.size(), 2u);
  for (const auto& [id, counts] : emitted)
    EXPECT_EQ(counts, (std::vector<size_t>{1, 3, 3, 3, 3, 3})) << "request " << id;
  const SpecStats& st = e.spec_stats();
  EXPECT_EQ(st.verify_steps, 10);
  EXPECT_EQ(st.drafted, 10 * n);
  EXPECT_EQ(st.accepted, st.drafted);
  EXPECT_EQ(st.rollbacks, 0);
}

// The successor map of the scripted tests: 2 -> 3 -> ... -> 30 -> 2 (a cycle: the reply never ends).
std::map<int32_t, int32_t> cycle_2_to_30() {
  std::map<int32_t, int32_t> next;
  for (int32_t i = 2; i < 30; ++i) next[i] = i + 1;
  next[30] = 2;
  return next;
}

// A tiny checkpoint (seed 5) whose weights follow `next` at `margin` (model/scripted_weights.h),
// its MTP layer predicting the script too when `predicting`, in a temporary directory named by
// `tag` (the caller removes it).
std::filesystem::path scripted_checkpoint(const std::string& arch, const std::string& tag,
                                          const std::map<int32_t, int32_t>& next, double margin, bool predicting) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("dsa_spec_" + tag + "_" + arch + "_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  TinyOptions t;
  t.arch = arch;
  t.seed = 5;
  make_tiny_checkpoint(t, dir.string());
  model::apply_scripted_weights(dir.string(), next, margin);
  if (predicting) model::apply_predicting_mtp(dir.string());
  return dir;
}

// A scripted checkpoint whose MTP layer predicts the script (model/scripted_weights.h): its real
// drafts (no hook) are accepted, so a step emits up to N + 1 tokens, and the output is the script.
TEST_P(SpeculativeTest, PredictingMtpLayerDraftsAreAccepted) {
  const std::map<int32_t, int32_t> next = cycle_2_to_30();
  const std::filesystem::path dir = scripted_checkpoint(GetParam(), "script", next, 40.0, true);
  auto lm = model::load_causal_lm(dir.string(), Device::cpu(), {.progress = false, .mtp = true});
  // The third request stops on token 20, inside an accepted span.
  const std::vector<std::vector<int32_t>> prompts{{100, 200, 7}, {300, 12}, {55, 4}};
  std::vector<SamplingParams> params{greedy(40), greedy(33), greedy(40)};
  params[2].stop_token_ids = {20};
  EngineOptions o;
  o.max_running = 2;
  o.log_capacity = false;
  o.max_running = 3;
  const Outcome base = generate(*lm, prompts, params, o);
  ASSERT_EQ(base.tokens[2].size(), 16u);  // 5, 6, ..., 20
  for (size_t i = 0; i < prompts.size(); ++i)
    for (size_t k = 0; k < base.tokens[i].size(); ++k)  // the script: successors of the prompt's last token
      ASSERT_EQ(base.tokens[i][k], next.at(k == 0 ? prompts[i].back() : base.tokens[i][k - 1])) << i << " " << k;
  for (int n : {1, 3}) {
    o.speculative_tokens = n;
    const Outcome spec = generate(*lm, prompts, params, o);
    print_stats(fmt::format("{} predicting MTP N={}", GetParam(), n), spec.stats);
    EXPECT_EQ(spec.tokens, base.tokens) << "N = " << n;
    EXPECT_EQ(spec.finishes[2], FinishReason::Stop);
    EXPECT_GT(spec.stats.drafted, 0);
    EXPECT_EQ(spec.stats.accepted, spec.stats.drafted) << "N = " << n;
    EXPECT_GT(spec.stats.mean_accepted_length(), n + 0.5);
  }
  lm.reset();
  std::filesystem::remove_all(dir);
}

// A KV cache of two pages of 64 tokens (GLM) for two requests that grow past them: the newest
// is preempted while speculating (its drafts, MTP cache position and pages dropped) and later
// recomputed; the output stays the one without drafts.
TEST(SpeculativePreemption, GlmPreemptedWhileSpeculating) {
  model::CausalLM& lm = tiny("glm_moe_dsa");
  const auto prompts = random_prompts({40, 20}, lm.config().vocab_size, 31);
  const std::vector<SamplingParams> params{greedy(50), greedy(40)};
  EngineOptions o;
  o.max_running = 2;
  o.kv_blocks = 2;
  o.max_model_len = 128;
  o.log_capacity = false;
  const Outcome base = generate(lm, prompts, params, o);
  ASSERT_GT(base.preemptions, 0);
  for (int n : {1, 3}) {
    o.speculative_tokens = n;
    const Outcome spec = generate(lm, prompts, params, o);
    print_stats(fmt::format("glm preemption N={} ({} preemptions)", n, spec.preemptions), spec.stats);
    EXPECT_EQ(spec.tokens, base.tokens) << "N = " << n;
    EXPECT_GT(spec.preemptions, 0) << "N = " << n;
  }
}

// The predicting scripted checkpoint at a low margin (6: the script's token has probability about
// e^6 / (e^6 + 511) = 0.44 at temperature 1, so sampled outputs soon leave the script for tokens
// without a successor, whose rows are near uniform): its MTP layer's distribution is the
// target's, so the rejection rule accepts nearly every draft, while exact match accepts a draft
// only when the target's own draw equals the MTP layer's argmax (almost never on flat rows).
std::filesystem::path predicting_low_margin_checkpoint(const std::string& arch, const std::string& tag) {
  return scripted_checkpoint(arch, tag, cycle_2_to_30(), /*margin=*/6.0, true);
}

TEST_P(SpeculativeTest, PredictingMtpLayerSampledDraftsAreAccepted) {
  const std::filesystem::path dir = predicting_low_margin_checkpoint(GetParam(), "sampled");
  auto lm = model::load_causal_lm(dir.string(), Device::cpu(), {.progress = false, .mtp = true});
  const std::vector<std::vector<int32_t>> prompts{{100, 200, 7}, {300, 12}};
  SamplingParams p = greedy(48);
  p.temperature = 1.0;
  p.seed = 77;
  EngineOptions o;
  o.max_running = 2;
  o.log_capacity = false;
  for (int n : {1, 3}) {
    o.speculative_tokens = n;
    o.speculative_acceptance = SpecAcceptance::Rejection;
    const Outcome rej = generate(*lm, prompts, {p}, o);
    o.speculative_acceptance = SpecAcceptance::Exact;
    const Outcome exact = generate(*lm, prompts, {p}, o);
    print_stats(fmt::format("{} predicting MTP sampled rejection N={}", GetParam(), n), rej.stats);
    print_stats(fmt::format("{} predicting MTP sampled exact N={}", GetParam(), n), exact.stats);
    ASSERT_GT(rej.stats.drafted, 40);
    EXPECT_GT(rej.stats.acceptance_rate(), 0.95) << "N = " << n;
    EXPECT_LT(exact.stats.acceptance_rate(), 0.7) << "N = " << n;
    EXPECT_GT(rej.stats.mean_accepted_length(), exact.stats.mean_accepted_length() + 0.3 * n) << "N = " << n;
  }
  lm.reset();
  std::filesystem::remove_all(dir);
}

// End to end, the rejection rule keeps the target's distribution when the drafts come from a
// different one: a scripted checkpoint whose script is a cycle through the whole vocabulary
// (margin 6: each token is followed by its successor with probability about 0.44 at temperature
// 1) keeps its random MTP layer, whose distribution is nearly flat. Over 6 requests x 80 tokens
// (seeds 1..6) the fraction of tokens that follow the script is the same with N = 2 drafts as
// without drafts, within 0.1 (each rate has a standard deviation of about 0.023 over 480
// tokens; measured: 0.435 without drafts, 0.410 GLM and 0.429 V4 with them). About 0.44 of the
// drafts are accepted (sum min(p, q): p's flat part); a rule that kept more of the nearly flat
// drafts would pull the rate towards the MTP layer's own, about 1/512.
TEST_P(SpeculativeTest, RejectionKeepsTheTargetDistributionWithAWrongDraftModel) {
  const int32_t V = static_cast<int32_t>(vocab());
  std::map<int32_t, int32_t> next;
  for (int32_t i = 0; i < V; ++i) next[i] = (i + 1) % V;
  const std::filesystem::path dir = scripted_checkpoint(GetParam(), "cycle", next, /*margin=*/6.0, false);
  auto lm = model::load_causal_lm(dir.string(), Device::cpu(), {.progress = false, .mtp = true});
  const auto prompts = random_prompts({3, 4, 2, 5, 3, 2}, V, 41);
  std::vector<SamplingParams> params;
  for (uint64_t i = 1; i <= prompts.size(); ++i) {
    SamplingParams p = greedy(80);
    p.temperature = 1.0;
    p.seed = i;
    params.push_back(p);
  }
  auto follow_rate = [&](const Outcome& r) {
    int64_t follow = 0, total = 0;
    for (size_t i = 0; i < r.tokens.size(); ++i)
      for (size_t k = 0; k < r.tokens[i].size(); ++k) {
        const int32_t prev = k == 0 ? prompts[i].back() : r.tokens[i][k - 1];
        follow += r.tokens[i][k] == (prev + 1) % V;
        ++total;
      }
    return static_cast<double>(follow) / static_cast<double>(total);
  };
  EngineOptions o;
  o.max_running = 6;
  o.log_capacity = false;
  const Outcome base = generate(*lm, prompts, params, o);
  o.speculative_tokens = 2;
  const Outcome rej = generate(*lm, prompts, params, o);
  print_stats(GetParam() + " cycle script, random MTP, sampled rejection N=2", rej.stats);
  const double b = follow_rate(base), r = follow_rate(rej);
  std::printf("%s: the script is followed by %.3f of the tokens without drafts, %.3f with N = 2 (rejection)\n",
              GetParam().c_str(), b, r);
  EXPECT_GT(b, 0.25);  // the checkpoint does follow its script often (so the rate can tell)
  EXPECT_NEAR(r, b, 0.1);
  EXPECT_GT(rej.stats.drafted, 100);
  EXPECT_LT(rej.stats.acceptance_rate(), 0.8);  // q is not p: many drafts are replaced by residual draws
  lm.reset();
  std::filesystem::remove_all(dir);
}

// The same on the GPU (CUDA graphs on: draft and verification steps return logits rows for the
// rule): the rejection rule accepts nearly every draft and a seed reproduces; exact acceptance
// and greedy requests keep the output without drafts.
TEST_P(SpeculativeTest, CudaSampledRejectionOnThePredictingModel) {
  DSA_REQUIRE_CUDA();
  const std::filesystem::path dir = predicting_low_margin_checkpoint(GetParam(), "cuda_sampled");
  auto lm = model::load_causal_lm(dir.string(), Device::cuda(0), {.progress = false, .mtp = true});
  const std::vector<std::vector<int32_t>> prompts{{100, 200, 7}, {300, 12}, {9}};
  SamplingParams p = greedy(48);
  p.temperature = 1.0;
  p.seed = 77;
  const std::vector<SamplingParams> params{p, p, greedy(48)};
  EngineOptions o;
  o.max_running = 3;
  o.log_capacity = false;
  o.memory.kv_cache_bytes = size_t{64} << 20;  // not 90 % of the device: CUDA tests run side by side
  o.speculative_acceptance = SpecAcceptance::Exact;
  const Outcome base = generate(*lm, prompts, params, o);
  for (int n : {1, 3}) {
    o.speculative_tokens = n;
    o.speculative_acceptance = SpecAcceptance::Exact;
    const Outcome exact = generate(*lm, prompts, params, o);
    EXPECT_EQ(exact.tokens, base.tokens) << "exact, N = " << n;
    o.speculative_acceptance = SpecAcceptance::Rejection;
    const Outcome rej = generate(*lm, prompts, params, o);
    print_stats(fmt::format("cuda {} predicting MTP sampled rejection N={}", GetParam(), n), rej.stats);
    EXPECT_EQ(rej.tokens[2], base.tokens[2]) << "greedy, N = " << n;
    for (const auto& toks : rej.tokens) {
      ASSERT_EQ(toks.size(), 48u);
      for (int32_t t : toks) ASSERT_TRUE(t >= 0 && t < lm->config().vocab_size) << t;
    }
    EXPECT_GT(rej.stats.acceptance_rate(), 0.95) << "N = " << n;
    EXPECT_EQ(generate(*lm, prompts, params, o).tokens, rej.tokens) << "N = " << n;
  }
  lm.reset();
  std::filesystem::remove_all(dir);
}

TEST_P(SpeculativeTest, BadSpeculativeTokensAreClearErrors) {
  EngineOptions o;
  o.log_capacity = false;
  o.speculative_tokens = -1;
  try {
    Engine e(lm(), o);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--speculative-tokens must be in [0, 64], got -1"), std::string::npos)
        << e.what();
  }
  SamplingParams p = greedy(4);
  p.speculative_tokens = -2;
  EXPECT_THROW(p.validate(vocab()), Error);
  EXPECT_EQ(parse_spec_acceptance("rejection"), SpecAcceptance::Rejection);
  EXPECT_EQ(parse_spec_acceptance("exact"), SpecAcceptance::Exact);
  for (const char* bad : {"", "Exact", "greedy"}) {
    try {
      parse_spec_acceptance(bad);
      FAIL() << "no error for '" << bad << "'";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(fmt::format("--speculative-acceptance must be 'rejection' or 'exact', "
                                                       "got '{}'", bad)),
                std::string::npos)
          << e.what();
    }
  }
}

// On CUDA: the draft forward, the verification of N + 1 tokens and every rollback run on the
// device, with and without CUDA graphs. The reference is the same CUDA engine without drafts,
// token for token: that holds only while every kernel computes a token's row the same way
// whatever the number of tokens in the step (a tactic that depends on it could flip a near-tie;
// the printed statistics and the first differing request say where).
TEST_P(SpeculativeTest, CudaGreedyOutputEqualsDecodingWithoutDrafts) {
  DSA_REQUIRE_CUDA();
  auto cuda_lm = model::load_causal_lm(tiny_model_dir(GetParam()), Device::cuda(0), {.progress = false, .mtp = true});
  const auto prompts = random_prompts({20, 9, 31}, vocab(), 3);
  std::vector<SamplingParams> params{greedy(60), greedy(16), greedy(40)};
  params[1].speculative_tokens = 0;
  EngineOptions o;
  o.max_running = 3;
  o.max_step_tokens = 32;
  o.max_prefill_chunk = 8;
  o.log_capacity = false;
  o.memory.kv_cache_bytes = size_t{64} << 20;  // not 90 % of the device: CUDA tests run side by side
  const Outcome base = generate(*cuda_lm, prompts, params, o);
  for (bool graphs : {false, true}) {
    for (int n : {1, 2, 3}) {
      o.cuda_graphs = graphs;
      o.speculative_tokens = n;
      const Outcome spec = generate(*cuda_lm, prompts, params, o);
      print_stats(fmt::format("cuda {} N={} graphs={}", GetParam(), n, graphs), spec.stats);
      for (size_t i = 0; i < prompts.size(); ++i)
        EXPECT_EQ(spec.tokens[i], base.tokens[i]) << "N = " << n << ", graphs " << graphs << ", request " << i;
      EXPECT_GT(spec.stats.verify_steps, 0);
    }
  }
}

// On CUDA, the scripted checkpoint's predicting MTP layer: every draft accepted, the output is
// the script (CUDA graphs on: the default).
TEST_P(SpeculativeTest, CudaPredictingMtpLayerDraftsAreAccepted) {
  DSA_REQUIRE_CUDA();
  const std::filesystem::path dir = scripted_checkpoint(GetParam(), "cuda", cycle_2_to_30(), 40.0, true);
  auto lm = model::load_causal_lm(dir.string(), Device::cuda(0), {.progress = false, .mtp = true});
  const std::vector<std::vector<int32_t>> prompts{{100, 200, 7}, {300, 12}, {55, 4}};
  std::vector<SamplingParams> params{greedy(60), greedy(33), greedy(40)};
  params[2].stop_token_ids = {20};
  EngineOptions o;
  o.max_running = 3;
  o.log_capacity = false;
  o.memory.kv_cache_bytes = size_t{64} << 20;
  const Outcome base = generate(*lm, prompts, params, o);
  ASSERT_EQ(base.tokens[2].size(), 16u);
  for (int n : {1, 2, 3}) {
    o.speculative_tokens = n;
    const Outcome spec = generate(*lm, prompts, params, o);
    print_stats(fmt::format("cuda {} predicting MTP N={}", GetParam(), n), spec.stats);
    EXPECT_EQ(spec.tokens, base.tokens) << "N = " << n;
    EXPECT_EQ(spec.finishes[2], FinishReason::Stop);
    EXPECT_EQ(spec.stats.accepted, spec.stats.drafted) << "N = " << n;
    EXPECT_GT(spec.stats.mean_accepted_length(), n + 0.5);
  }
  lm.reset();
  std::filesystem::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(Tiny, SpeculativeTest, ::testing::Values("glm_moe_dsa", "deepseek_v4"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace dsa::engine::test
