// Tensor parallelism in the engine (engine.h, tp_ranks.h, docs/parallelism.md): an Engine over
// 2 and 4 ranks of the tiny GLM and of the tiny DeepSeek-V4 without discrete choices
// (tp_checkpoint.h) gives the tokens of the whole model through continuous batching, chunked
// prefill and preemption (few KV pages);
// the options it cannot run are refused, and a rank that fails stops the engine with its reason.
// Every test runs on the CPU and, where a GPU is present, on cuda:0 (all ranks on one device,
// the collectives staged through host memory).
#include <cmath>
#include <cstdio>
#include <map>
#include <ostream>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "common/testing.h"
#include "dsa/engine/engine.h"
#include "dsa/engine/tp_models.h"
#include "dsa/engine/tp_ranks.h"
#include "engine_models.h"
#include "tp_checkpoint.h"

namespace dsa::engine {
namespace {

using ::dsa::test::error_of;

constexpr uint64_t kPromptSeed = 23;
// index_topk 128: every context the test reaches (< 128 tokens, two pages) keeps every key.
constexpr int64_t kTopk = 128;

struct TpCase {
  const char* device;
  int tp;
};
void PrintTo(const TpCase& c, std::ostream* os) { *os << c.device << " tp " << c.tp; }
std::string case_name(const ::testing::TestParamInfo<TpCase>& i) {
  return std::string(i.param.device[0] == 'c' && i.param.device[1] == 'u' ? "Cuda" : "Cpu") + "Tp" +
         std::to_string(i.param.tp);
}

class TpEngine : public ::testing::TestWithParam<TpCase> {
 protected:
  Device device() const { return std::string(GetParam().device) == "cuda" ? Device::cuda(0) : Device::cpu(); }
  void SetUp() override {
    if (device().is_cuda()) DSA_REQUIRE_CUDA();
  }
};

struct EngineRun {
  std::map<uint64_t, std::vector<int32_t>> tokens;
  std::map<uint64_t, std::vector<TokenLogprob>> logprobs;
  int64_t preemptions = 0;
};

// The requests of every run: 4 prompts whose contexts need 1-2 pages each, 7 in all, against 3
// pages: admissions wait and decodes preempt; prompts are prefilled in chunks of 16.
EngineOptions options() {
  EngineOptions o;
  o.max_running = 3;
  o.max_step_tokens = 32;
  o.max_prefill_chunk = 16;
  o.kv_blocks = 3;
  o.max_model_len = 128;
  o.log_capacity = false;
  return o;
}

// logprobs: the chosen token's logprob and the `logprobs` best (2: a near tie shows); -1: none
// (requests whose rows come to the host do not speculate).
EngineRun generate(Engine& e, const std::vector<std::vector<int32_t>>& prompts, int logprobs = 2) {
  SamplingParams p;
  p.max_tokens = 20;
  p.logprobs = logprobs;
  p.ignore_eos = true;
  std::vector<kv::RequestId> ids;
  for (const auto& pr : prompts) ids.push_back(e.add_request(pr, p));
  EngineRun r;
  while (e.has_unfinished())
    for (const StepOutput& o : e.step()) {
      EXPECT_NE(o.finish, FinishReason::Error) << o.error;
      auto& t = r.tokens[o.id];
      t.insert(t.end(), o.new_tokens.begin(), o.new_tokens.end());
      auto& l = r.logprobs[o.id];
      l.insert(l.end(), o.logprobs.begin(), o.logprobs.end());
    }
  r.preemptions = e.num_preemptions();
  EXPECT_EQ(e.kv_usage()[0].used_pages, 0);
  return r;
}

// Greedy tokens of TP = N equal those of the whole model. The ranks' partial sums are rounded to
// bf16 before the all-reduce (the whole model rounds once), so logits differ by a few bf16 ulps
// (test_tensor_parallel.cpp: within 2 % of max |logit|) and a near tie may pick the other token:
// there the request is compared no further, and the flip is accepted only when the whole model's
// two best logprobs are within the bound. Every compared logprob must be within it too.
void expect_greedy_tokens_equal(const std::string& dir, int tp, Device dev, const std::vector<int64_t>& lengths,
                                const EngineOptions& opt) {
  std::printf("%s: checkpoint seed %llu, prompt seed %llu, tp %d on %s\n", dir.c_str(),
              static_cast<unsigned long long>(test::kTpCheckpointSeed), static_cast<unsigned long long>(kPromptSeed), tp,
              dev.str().c_str());
  std::unique_ptr<model::CausalLM> whole = model::load_causal_lm(dir, dev, {.progress = false});
  const auto prompts = test::random_prompts(lengths, whole->config().vocab_size, kPromptSeed);
  EngineRun ref;
  {
    Engine e(*whole, opt);
    ref = generate(e, prompts);
  }
  TensorParallelModels models(dir, tp, {dev});
  Engine e(models, opt);
  ASSERT_EQ(e.tensor_parallel_size(), tp);
  const EngineRun got = generate(e, prompts);
  EXPECT_GT(ref.preemptions, 0) << "the test must preempt";
  EXPECT_GT(got.preemptions, 0) << "the test must preempt";

  constexpr float kBound = 0.1f;  // logprobs: a few bf16 ulps of logits of ~3-4 through 4 layers
  size_t compared = 0, total = 0, flips = 0;
  float worst = 0;
  for (const auto& [id, want] : ref.tokens) {
    const std::vector<int32_t>& have = got.tokens.at(id);
    ASSERT_EQ(have.size(), want.size()) << "request " << id;
    total += want.size();
    const auto& lw = ref.logprobs.at(id);
    const auto& lh = got.logprobs.at(id);
    ASSERT_EQ(lw.size(), want.size());
    ASSERT_EQ(lh.size(), have.size());
    for (size_t k = 0; k < want.size(); ++k) {
      if (have[k] != want[k]) {
        ASSERT_FALSE(lw[k].top.size() < 2) << "request " << id << " token " << k;
        const float gap = lw[k].top[0].second - lw[k].top[1].second;
        std::printf("request %llu token %zu: tp %d picked %d, the whole model %d (its top-2 gap %.5f)\n",
                    static_cast<unsigned long long>(id), k, tp, have[k], want[k], gap);
        EXPECT_EQ(lw[k].top[1].first, have[k]) << "request " << id << " token " << k << ": not the runner-up";
        EXPECT_LE(gap, kBound) << "request " << id << " token " << k << ": no near tie";
        ++flips;
        break;
      }
      const float d = std::fabs(lh[k].logprob - lw[k].logprob);
      worst = std::max(worst, d);
      EXPECT_LE(d, kBound) << "request " << id << " token " << k;
      ++compared;
    }
  }
  std::printf("tp %d: %zu of %zu tokens compared, %zu near-tie flips, max |logprob diff| %.5f; preemptions %lld / "
              "%lld\n",
              tp, compared, total, flips, worst, static_cast<long long>(got.preemptions),
              static_cast<long long>(ref.preemptions));
  EXPECT_GE(compared * 2, total) << "too few tokens compared to say anything";
  // Two all-reduces per layer of bf16 [T][hidden] for every token the engine computed.
  EXPECT_GT(e.tensor_parallel()->collective_bytes(0), 0u);
  for (int r = 1; r < tp; ++r) EXPECT_EQ(e.tensor_parallel()->collective_bytes(r), e.tensor_parallel()->collective_bytes(0));
}

TEST_P(TpEngine, GreedyTokensEqualTheWholeModel) {
  expect_greedy_tokens_equal(test::tp_checkpoint_dir(true, kTopk), GetParam().tp, device(), {50, 45, 60, 9},
                             options());
}

// DeepSeek-V4 (tp_checkpoint.h: 4 heads in 4 output groups, every expert routed, index_topk 128
// above every compressed entry): its pages hold 256 tokens, so the long prompt (prefilled in two
// chunks) crosses a page on its sixth decode while the next two still run, against 3 pages for the
// 4 requests: admissions wait and that decode preempts. (Short otherwise: the CPU reference runs
// every token through all 8 experts.)
TEST_P(TpEngine, DeepseekV4GreedyTokensEqualTheWholeModel) {
  EngineOptions o = options();
  o.max_model_len = 512;
  o.max_step_tokens = 160;
  o.max_prefill_chunk = 128;
  expect_greedy_tokens_equal(test::tp_v4_checkpoint_dir(kTopk), GetParam().tp, device(), {250, 20, 12, 9}, o);
}

// Speculative decoding over tensor-parallel ranks: the MTP layer sharded as the others, every
// rank with hand-over buffers of its own, and (DeepSeek-V4, CSA windows of 4 positions) the
// compressor-state rollback of a rejected span on every rank. Greedy tokens equal those of the
// same ranks decoding without drafts, token for token (each row's arithmetic, all-reduces
// included, does not depend on what else the step holds), with preemptions on the way.
TEST_P(TpEngine, SpeculativeGreedyTokensEqualDecodingWithoutDrafts) {
  const int tp = GetParam().tp;
  for (const bool v4 : {false, true}) {
    const std::string dir = v4 ? test::tp_v4_checkpoint_dir(kTopk) : test::tp_checkpoint_dir(true, kTopk);
    TpLoadOptions lo;
    lo.mtp = true;
    TensorParallelModels models(dir, tp, {device()}, lo);
    EngineOptions o = options();
    if (v4) {  // V4 pages hold 256 tokens: one page per request, 3 for 4 requests
      o.max_model_len = 512;
      o.max_step_tokens = 64;
    }
    const std::vector<int64_t> lengths = v4 ? std::vector<int64_t>{30, 21, 12, 9} : std::vector<int64_t>{50, 45, 60, 9};
    const auto prompts = test::random_prompts(lengths, models.model(0).config().vocab_size, kPromptSeed);
    EngineRun base;
    {
      Engine e(models, o);
      base = generate(e, prompts, /*logprobs=*/-1);
    }
    // The tiny model's own drafts (N = 3: nearly all rejected, V4 rolls back), then drafts forced
    // to the right tokens (N = 2: all accepted, the chained draft steps run on accepted tokens).
    for (const bool forced : {false, true}) {
      const int n = forced ? 2 : 3;
      EngineOptions so = o;
      so.speculative_tokens = n;
      if (forced)
        so.draft_hook = [&](const Sequence& s, std::vector<int32_t>& d) {
          const std::vector<int32_t>& want = base.tokens.at(s.id);  // ids are given in order from 0
          for (size_t k = 0; k < d.size(); ++k) {
            const size_t g = static_cast<size_t>(s.generated()) + k;
            d[k] = g < want.size() ? want[g] : 0;
          }
        };
      Engine e(models, so);
      const EngineRun spec = generate(e, prompts, /*logprobs=*/-1);
      const char* what = v4 ? "deepseek_v4" : "glm5";
      EXPECT_EQ(spec.tokens, base.tokens) << what << ", N = " << n << (forced ? ", forced drafts" : "");
      const SpecStats& st = e.spec_stats();
      EXPECT_GT(st.drafted, 0) << "no draft was verified";
      if (forced) EXPECT_EQ(st.accepted, st.drafted) << what;
      if (v4 && !forced) EXPECT_GT(st.rollbacks, 0) << "no compressor-state rollback ran";
      std::printf("%s tp %d N %d%s: %lld drafted, %lld accepted, %lld rollbacks, %lld preemptions\n", what, tp, n,
                  forced ? " (forced right)" : "", static_cast<long long>(st.drafted),
                  static_cast<long long>(st.accepted), static_cast<long long>(st.rollbacks),
                  static_cast<long long>(spec.preemptions));
    }
  }
}

// What a tensor-parallel engine cannot run is refused by name, before a step.
TEST_P(TpEngine, RefusesWhatItCannotRun) {
  const int tp = GetParam().tp;
  TensorParallelModels models(test::tp_checkpoint_dir(true, kTopk), tp, {device()});
  EngineOptions o = options();
  o.speculative_tokens = 2;  // the MTP layer was not loaded (TpLoadOptions::mtp)
  EXPECT_EQ(error_of([&] { Engine e(models, o); }),
            "engine: --speculative-tokens 2: the model was loaded without its MTP layer "
            "(model::LoadModelOptions::mtp)");
  EXPECT_EQ(error_of([&] { check_tensor_parallel_options(tp, 1, /*distributed=*/true); }),
            fmt::format("--speculative-tokens 1 with --nnodes {}: speculative decoding runs with the tensor-parallel "
                        "ranks of one process only (the draft steps are not sent between processes yet); use one "
                        "process or no drafts",
                        tp));
  // The stock tiny V4: 2 output groups, expert intermediate size 128.
  const std::string v4 = test::tiny_model_dir("deepseek_v4");
  EXPECT_EQ(error_of([&] { TensorParallelModels m(v4, tp, {device()}); }),
            tp == 2 ? "tensor parallel size (--tensor-parallel-size) 2: moe_intermediate_size 128 / 2 = 64 is not a "
                      "multiple of 128 (each rank's slice is the K of its experts' down projection)"
                    : "tensor parallel size (--tensor-parallel-size) 4 does not divide o_groups (2)");
  EXPECT_EQ(error_of([&] { TensorParallelModels m(v4, 0, {device()}); }),
            "tensor parallel size (--tensor-parallel-size) must be >= 1, got 0");
}

// A rank that fails stops the engine with its reason: the group stays stopped, so the next step
// fails at once naming the failed rank and why (never a hang waiting for it).
TEST_P(TpEngine, AFailedRankStopsTheEngine) {
  const int tp = GetParam().tp;
  TensorParallelModels models(test::tp_checkpoint_dir(true, kTopk), tp, {device()});
  Engine e(models, options());
  const auto prompts = test::random_prompts({12}, e.config().vocab_size, kPromptSeed);
  SamplingParams p;
  p.max_tokens = 4;
  e.add_request(prompts[0], p);
  e.step();
  EXPECT_EQ(error_of([&] {
              models.run([&](int r) {
                if (r == tp - 1) fail("rank {} broke", r);
                models.group().rank(r).barrier();  // the others wait for it
              });
            }),
            fmt::format("rank {} of {}: rank {} broke", tp - 1, tp, tp - 1));
  const std::string next = error_of([&] { e.step(); });
  EXPECT_NE(next.find(fmt::format("rank {} broke", tp - 1)), std::string::npos) << next;
}

INSTANTIATE_TEST_SUITE_P(Ranks, TpEngine,
                         ::testing::Values(TpCase{"cpu", 2}, TpCase{"cpu", 4}, TpCase{"cuda", 2}, TpCase{"cuda", 4}),
                         case_name);

}  // namespace
}  // namespace dsa::engine
