// CUDA graphs of decode steps (engine/step_graphs.h): on CUDA, an engine that replays graphs gives
// bit-identical tokens and logprobs to one that runs every step eagerly, for both tiny models,
// over a schedule with requests joining and leaving, sampled and greedy rows, runs that cross the
// V4 compressor boundaries (ratios 4 and 128) and the sliding window, and preemption under a
// small cache (decode steps padded to their batch bucket in both runs). With the batch size
// changing every step: replay of the bucket graphs equals padded and unpadded eager runs; the
// start-up capture of the buckets serves the first decode step. On the CPU: the graph cache's
// bookkeeping (keys compared whole, LRU eviction) and the engine's padded schedule equal to the
// unpadded one.
#include <gtest/gtest.h>

#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "common/testing.h"
#include "dsa/engine/engine.h"
#include "dsa/engine/step_graphs.h"
#include "engine_models.h"
#include "varying_batches.h"

namespace dsa::engine::test {
namespace {

TEST(StepGraphs, KeyDiffNamesTheWordsThatChanged) {
  ShapeKey a, b, c, d;
  a.add(5, "memory epoch").add(0x10, "upload address", 3).add(7);
  b.add(5, "memory epoch").add(0x20, "upload address", 3).add(8);
  EXPECT_EQ(a.diff(a), "");
  EXPECT_EQ(b.diff(a), "upload address[3]: 0x10 -> 0x20, word 2: 0x7 -> 0x8");
  EXPECT_EQ(b.diff(a, 1), "upload address[3]: 0x10 -> 0x20 and 1 more");
  c.add(1, "tokens");
  EXPECT_EQ(c.diff(a), "1 words, was 3 (tensors defined or dimensions changed)");
  d.append(a);  // labels travel with the words
  EXPECT_TRUE(d == a);
  EXPECT_EQ(b.diff(d), b.diff(a));
}

TEST(StepGraphs, KeysAreComparedWholeAndTheLeastRecentGoesFirst) {
  StepGraphs g(/*capacity=*/2);
  ShapeKey a, b, c;
  a.add(1).add(2);
  b.add(1).add(3);
  c.add(7);
  EXPECT_FALSE(g.seen(a));
  g.mark_seen(a);
  EXPECT_TRUE(g.seen(a));
  EXPECT_FALSE(g.seen(b));
  EXPECT_EQ(g.find(a), nullptr);
  g.insert(a, {nullptr, 10, 0});
  g.insert(b, {nullptr, 20, 0});
  ASSERT_NE(g.find(a), nullptr);  // a is now the most recent
  EXPECT_EQ(g.find(a)->nodes, 10);
  g.insert(c, {nullptr, 30, 0});  // evicts b
  EXPECT_EQ(g.find(b), nullptr);
  ASSERT_NE(g.find(c), nullptr);
  EXPECT_EQ(g.find(c)->nodes, 30);
  EXPECT_EQ(g.size(), 2);
  EXPECT_EQ(g.stats().evicted, 1);
  ShapeKey a2;  // same words: same key
  a2.add(1).add(2);
  EXPECT_NE(g.find(a2), nullptr);
  g.mark_seen(b);
  EXPECT_TRUE(g.seen(b));
  g.mark_failed(b);  // a key whose capture failed is not captured again
  EXPECT_FALSE(g.seen(b));
  g.mark_seen(b);
  EXPECT_FALSE(g.seen(b));
  g.clear();
  EXPECT_EQ(g.size(), 0);
  EXPECT_FALSE(g.seen(a));
}

struct Schedule {
  std::vector<std::vector<int32_t>> tokens;  // per request, in the order added
  std::vector<std::vector<float>> logprobs;
  StepGraphStats stats;
  int64_t preemptions = 0;
  int64_t padded_steps = 0;
};

// A fixed schedule: three requests from the start (one long enough to cross a 128-entry boundary,
// one sampled with top-k, one greedy with logprobs), a fourth joining at step 20 and a fifth at
// step 45, requests finishing at different steps.
Schedule drive(model::CausalLM& lm, bool graphs, int64_t kv_blocks,
               EngineOptions::DecodePadding padding = EngineOptions::DecodePadding::WithGraphs) {
  EngineOptions o;
  o.decode_padding = padding;
  o.max_running = 4;
  o.max_step_tokens = 64;
  o.max_model_len = 320;
  o.cuda_graphs = graphs;
  if (kv_blocks > 0)
    o.kv_blocks = kv_blocks;
  else
    o.memory.kv_cache_bytes = size_t{64} << 20;
  o.log_capacity = false;
  Engine e(lm, o);
  const int64_t V = lm.config().vocab_size;
  const auto prompts = random_prompts({9, 40, 3, 17, 5}, V, 11);
  auto params = [](int64_t max_tokens, double temperature, int64_t top_k, double top_p, uint64_t seed, int logprobs) {
    SamplingParams p;
    p.max_tokens = max_tokens;
    p.temperature = temperature;
    p.top_k = top_k;
    p.top_p = top_p;
    if (temperature > 0) p.seed = seed;
    p.logprobs = logprobs;
    p.ignore_eos = true;
    return p;
  };
  const std::vector<SamplingParams> ps{params(150, 0, 0, 1, 0, -1), params(40, 0.8, 20, 1, 5, -1),
                                       params(70, 0, 0, 1, 0, 2), params(60, 1.0, 0, 0.9, 9, -1),
                                       params(30, 0, 0, 1, 0, -1)};
  Schedule r;
  r.tokens.resize(5);
  r.logprobs.resize(5);
  std::map<uint64_t, size_t> index;
  auto add = [&](size_t i) { index[e.add_request(prompts[i], ps[i])] = i; };
  for (size_t i = 0; i < 3; ++i) add(i);
  int step = 0;
  while (e.has_unfinished()) {
    if (step == 20) add(3);
    if (step == 45) add(4);
    for (const StepOutput& s : e.step()) {
      EXPECT_NE(s.finish, FinishReason::Error) << s.error;
      const size_t i = index.at(s.id);
      r.tokens[i].insert(r.tokens[i].end(), s.new_tokens.begin(), s.new_tokens.end());
      for (const TokenLogprob& lp : s.logprobs) r.logprobs[i].push_back(lp.logprob);
    }
    ++step;
    if (step > 2000) break;
  }
  EXPECT_FALSE(e.has_unfinished());
  r.preemptions = e.num_preemptions();
  r.padded_steps = e.runner().padded_steps();
  if (e.runner().graphs()) r.stats = e.runner().graphs()->stats();
  return r;
}

class StepGraphsTest : public ::testing::TestWithParam<std::string> {};

void expect_same(const Schedule& eager, const Schedule& graph) {
  for (size_t i = 0; i < eager.tokens.size(); ++i) {
    EXPECT_EQ(graph.tokens[i], eager.tokens[i]) << "request " << i;
    ASSERT_EQ(graph.logprobs[i].size(), eager.logprobs[i].size()) << "request " << i;
    for (size_t j = 0; j < eager.logprobs[i].size(); ++j)  // bit-identical, not close
      EXPECT_EQ(graph.logprobs[i][j], eager.logprobs[i][j]) << "request " << i << " token " << j;
  }
  std::printf("graphs: %lld captures, %lld replays, %lld eager, %lld dropped (%s), %.1f ms capturing\n",
              static_cast<long long>(graph.stats.captures), static_cast<long long>(graph.stats.replays),
              static_cast<long long>(graph.stats.eager), static_cast<long long>(graph.stats.dropped),
              graph.stats.last_capture_error.c_str(), graph.stats.capture_ms);
}

TEST_P(StepGraphsTest, CudaReplayEqualsEager) {
  DSA_REQUIRE_CUDA();
  auto lm = model::load_causal_lm(tiny_model_dir(GetParam()), Device::cuda(0));
  // The eager run pads decode steps as the graph run does (padded == unpadded is its own test).
  const Schedule eager = drive(*lm, false, 0, EngineOptions::DecodePadding::Always);
  const Schedule graph = drive(*lm, true, 0);
  EXPECT_EQ(eager.tokens[0].size(), 150u);
  expect_same(eager, graph);
  // Most decode steps replayed (the schedule's batch composition changes a few times).
  EXPECT_GT(graph.stats.captures, 0);
  EXPECT_GT(graph.stats.replays, 100);
}

// Few pages: the running requests outgrow the cache and the newest are preempted and recomputed.
int64_t preempting_blocks(const std::string& arch) { return arch == "deepseek_v4" ? 2 : 6; }

TEST_P(StepGraphsTest, TheSmallCacheSchedulePreempts) {  // CPU: the schedule below does preempt
  auto lm = load_tiny_lm(GetParam());
  const Schedule r = drive(*lm, false, preempting_blocks(GetParam()));
  EXPECT_GT(r.preemptions, 0);
  EXPECT_EQ(r.tokens[0].size(), 150u);
}

TEST_P(StepGraphsTest, CudaReplayEqualsEagerUnderPreemption) {
  DSA_REQUIRE_CUDA();
  auto lm = model::load_causal_lm(tiny_model_dir(GetParam()), Device::cuda(0));
  const Schedule eager = drive(*lm, false, preempting_blocks(GetParam()), EngineOptions::DecodePadding::Always);
  const Schedule graph = drive(*lm, true, preempting_blocks(GetParam()));
  EXPECT_GT(eager.preemptions, 0);
  EXPECT_EQ(graph.preemptions, eager.preemptions);
  expect_same(eager, graph);
  EXPECT_GT(graph.stats.replays, 0);
}

// The engine's schedule (joins, leaves, sampled and logprob rows) with decode steps padded to
// their batch bucket gives the tokens and logprobs of the unpadded schedule (CPU).
TEST_P(StepGraphsTest, PaddedEngineScheduleEqualsUnpadded) {
  auto lm = load_tiny_lm(GetParam());
  const Schedule plain = drive(*lm, false, 0, EngineOptions::DecodePadding::Never);
  const Schedule padded = drive(*lm, false, 0, EngineOptions::DecodePadding::Always);
  EXPECT_EQ(plain.tokens[0].size(), 150u);
  EXPECT_EQ(plain.padded_steps, 0);
  EXPECT_GT(padded.padded_steps, 10);  // the three-request stretches
  expect_same(plain, padded);
}

void expect_same(const VaryingRun& a, const VaryingRun& b) {
  ASSERT_EQ(a.tokens.size(), b.tokens.size());
  for (size_t s = 0; s < a.tokens.size(); ++s) {
    EXPECT_EQ(b.tokens[s], a.tokens[s]) << "step " << s;
    ASSERT_EQ(b.logits[s].size(), a.logits[s].size()) << "step " << s;
    for (size_t j = 0; j < a.logits[s].size(); ++j)  // bit-identical, not close
      if (b.logits[s][j] != a.logits[s][j]) {
        ADD_FAILURE() << "step " << s << " logit " << j << ": " << b.logits[s][j] << " vs " << a.logits[s][j];
        break;
      }
  }
  std::printf("graphs: %lld captures, %lld replays, %lld eager, %lld dropped (%s); %lld padded steps\n",
              static_cast<long long>(b.graphs.captures), static_cast<long long>(b.graphs.replays),
              static_cast<long long>(b.graphs.eager), static_cast<long long>(b.graphs.dropped),
              b.graphs.last_capture_error.c_str(), static_cast<long long>(b.padded_steps));
}

// Batch size changing every step (3, 5, 1, 7, 2, 6, 4 requests; varying_batches.h): graphs of
// the padded buckets, replayed for every batch size of their bucket, give the tokens and logits
// of an eager run with the same padding (the graphs' own claim).
TEST_P(StepGraphsTest, CudaVaryingBatchReplayWithPaddingEqualsPaddedEager) {
  DSA_REQUIRE_CUDA();
  auto lm = model::load_causal_lm(tiny_model_dir(GetParam()), Device::cuda(0));
  const VaryingRun graph = run_varying_batches(*lm, true, 8, 60);
  const VaryingRun eager = run_varying_batches(*lm, false, 8, 60);
  EXPECT_GT(graph.padded_steps, 30);
  EXPECT_EQ(graph.decode_shapes, 4);  // buckets 1, 2, 4, 8 (context bucket 256 throughout)
  // One capture per bucket, two where device memory moved between a bucket's sightings.
  EXPECT_GE(graph.graphs.captures, 4);
  EXPECT_LE(graph.graphs.captures, 8);
  EXPECT_GT(graph.graphs.replays, 45);
  expect_same(eager, graph);
}

// The same against --enforce-eager (no padding): the real rows must not depend on the padding
// rows beside them, which on CUDA also needs every kernel to give a row the same bits whatever
// the number of rows (GEMM tactics and split-K chosen by the token count would break it).
TEST_P(StepGraphsTest, CudaVaryingBatchReplayWithPaddingEqualsUnpaddedEager) {
  DSA_REQUIRE_CUDA();
  auto lm = model::load_causal_lm(tiny_model_dir(GetParam()), Device::cuda(0));
  const VaryingRun graph = run_varying_batches(*lm, true, 8, 60);
  const VaryingRun eager = run_varying_batches(*lm, false, 0, 60);
  EXPECT_EQ(eager.padded_steps, 0);
  EXPECT_GT(graph.padded_steps, 30);
  expect_same(eager, graph);
}

// Start-up capture (Engine::capture_decode_graphs): every bucket of max_running 8 is captured
// (8, 4, 2, 1), and a decode step of 3 requests at a context under 256 replays the bucket-4 graph
// at once; the engine's tokens equal an eager engine's with the same padding.
TEST_P(StepGraphsTest, CudaStartupCaptureServesTheFirstDecodeStep) {
  DSA_REQUIRE_CUDA();
  auto lm = model::load_causal_lm(tiny_model_dir(GetParam()), Device::cuda(0));
  auto run = [&](bool graphs) -> std::vector<std::vector<int32_t>> {
    EngineOptions o;
    o.max_running = 8;
    o.max_step_tokens = 64;
    o.max_model_len = 256;
    o.cuda_graphs = graphs;
    o.decode_padding = EngineOptions::DecodePadding::Always;  // the eager run pads too
    o.memory.kv_cache_bytes = size_t{64} << 20;
    o.log_capacity = false;
    Engine e(*lm, o);
    const GraphCaptureReport rep = e.capture_decode_graphs();
    if (graphs) {
      EXPECT_EQ(rep.index_len, 256);
      EXPECT_EQ(rep.buckets.size(), 4u);
      for (size_t i = 0; i < rep.buckets.size(); ++i) {
        EXPECT_EQ(rep.buckets[i].batch, int64_t{8} >> i);
        EXPECT_GT(rep.buckets[i].nodes, 0) << rep.buckets[i].error;
      }
      EXPECT_FALSE(rep.memory_moved);
    } else {
      EXPECT_TRUE(rep.buckets.empty());
    }
    SamplingParams p;
    p.max_tokens = 12;
    p.ignore_eos = true;
    for (const auto& pr : random_prompts({9, 14, 3}, lm->config().vocab_size, 2)) e.add_request(pr, p);
    std::vector<std::vector<int32_t>> toks(3);
    int step = 0;
    while (e.has_unfinished()) {
      for (const StepOutput& s : e.step()) toks[s.id].insert(toks[s.id].end(), s.new_tokens.begin(), s.new_tokens.end());
      if (graphs && step == 1) {  // the first decode step
        EXPECT_EQ(e.runner().profile().graph, StepProfile::Graph::Replayed);
      }
      ++step;
    }
    return toks;
  };
  EXPECT_EQ(run(true), run(false));
}

INSTANTIATE_TEST_SUITE_P(Tiny, StepGraphsTest, ::testing::Values("glm_moe_dsa", "deepseek_v4"),
                         [](const auto& info) { return info.param == "glm_moe_dsa" ? "Glm5" : "DeepseekV4"; });

}  // namespace
}  // namespace dsa::engine::test
