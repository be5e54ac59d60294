// Warm-up plan (buckets, mixed batches, other dims) and the warm-up run: the first run tunes
// every bucket, a second run (new process state, same cache) finds every one.
#include "common/testing.h"
#include "dsa/core/progress.h"
#include "dsa/tune/bucket.h"
#include "dsa/tune/families.h"
#include "dsa/tune/plan_model.h"
#include "dsa/tune/synthetic_op.h"
#include "dsa/tune/tuning_cache.h"
#include "dsa/tune/warmup.h"
#include "tune/tune_test_util.h"

using namespace dsa;
using namespace dsa::tune;
using namespace dsa::tune::test;

TEST(TuneWarmupPlan, EveryBucketPlusMixedBatches) {
  SyntheticOp op;
  std::vector<TunableOp*> ops{&op};
  WarmupPlan plan = build_warmup_plan(ops, {.max_batched_tokens = 100, .max_seqs = 8});
  EXPECT_EQ(plan.token_buckets, (std::vector<int64_t>{1, 2, 4, 8, 16, 32, 64, 100}));
  ASSERT_EQ(plan.items.size(), 8u + 2u);
  EXPECT_FALSE(plan.items[0].mixed);
  EXPECT_EQ(plan.items[7].dims, Dims{100});
  // Mixed batches: 1 decode + a 99-token prefill chunk, 7 decodes + a 93-token chunk.
  EXPECT_TRUE(plan.items[8].mixed);
  EXPECT_NE(plan.items[8].label.find("1 decode + prefill chunk 99"), std::string::npos) << plan.items[8].label;
  EXPECT_NE(plan.items[9].label.find("7 decode + prefill chunk 93"), std::string::npos) << plan.items[9].label;
  EXPECT_EQ(plan.items[9].dims, Dims{100});
  EXPECT_EQ(plan.unique_keys(ops), 8u);
  auto mb = mixed_batches({.max_batched_tokens = 4, .max_seqs = 256});
  ASSERT_EQ(mb.size(), 1u);  // 255 decodes do not fit in 4 tokens
  EXPECT_EQ(mb[0].decode_tokens, 1);
  EXPECT_TRUE(mixed_batches({.max_batched_tokens = 1, .max_seqs = 4}).empty());
  EXPECT_THROW(build_warmup_plan(ops, {.max_batched_tokens = 0, .max_seqs = 1}), Error);
  EXPECT_THROW(build_warmup_plan(ops, {.max_batched_tokens = 8, .max_seqs = 0}), Error);
}

namespace {
class KeysOp : public SyntheticOp {
 public:
  KeysOp() : SyntheticOp(Config{.name = "keys_op", .signature = "s", .instance = "", .num_tactics = 4,
                                .failing_tactic = -2, .wrong_tactic = -2, .unit_us = 1}) {}
  std::vector<std::string> dim_names() const override { return {"tokens", "keys"}; }
  std::vector<std::vector<int64_t>> other_dim_buckets() const override { return {{512, 2048}}; }
};
}  // namespace

TEST(TuneWarmupPlan, OtherDimsCrossTheTokenBuckets) {
  KeysOp op;
  std::vector<TunableOp*> ops{&op};
  WarmupPlan plan = build_warmup_plan(ops, {.max_batched_tokens = 4, .max_seqs = 2});
  // (3 token buckets + 1 mixed) x 2 key buckets
  ASSERT_EQ(plan.items.size(), 8u);
  EXPECT_EQ(plan.unique_keys(ops), 6u);
  EXPECT_EQ(plan.items[0].dims, (Dims{1, 512}));
  EXPECT_EQ(plan.items[4].dims, (Dims{1, 2048}));
}

TEST(TuneWarmupPlan, ModelsFromTheModelConfig) {
  PlanModel flash = load_plan_model("deepseek-v4-flash");
  EXPECT_EQ(flash.model_type, "deepseek_v4");
  ASSERT_EQ(flash.attention.size(), 3u);  // sliding, CSA, HCA: three attention op instances
  EXPECT_EQ(flash.attention[0].kind, attn::LayerKind::Sliding);
  EXPECT_EQ(flash.attention[1].kind, attn::LayerKind::Csa);
  EXPECT_EQ(flash.attention[1].topk, 512);
  EXPECT_EQ(flash.attention[1].num_heads, 64);
  EXPECT_EQ(flash.attention[2].kind, attn::LayerKind::Hca);
  EXPECT_EQ(flash.hidden_size, 4096);
  EXPECT_EQ(flash.experts_per_token, 6);
  PlanModel glm = load_plan_model("glm-5.1");
  ASSERT_EQ(glm.attention.size(), 1u);
  EXPECT_EQ(glm.attention[0].kind, attn::LayerKind::MlaSparse);
  EXPECT_EQ(glm.attention[0].head_size, 576);
  EXPECT_EQ(glm.attention[0].topk, 2048);
  EXPECT_THROW(load_plan_model("llama-3"), Error);
  PlanModel empty;
  empty.name = "x";
  EXPECT_THROW(empty.validate(), Error);
}

TEST(TuneWarmup, FirstRunTunesSecondRunFindsEverything) {
  TempDir d;
  SyntheticOp::Config cfg;
  cfg.unit_us = 20;
  SyntheticOp op(cfg);
  std::vector<TunableOp*> ops{&op};
  WarmupPlan plan = build_warmup_plan(ops, {.max_batched_tokens = 16, .max_seqs = 4});
  WarmupOptions opt;
  opt.tune.timing.warmups = 1;
  opt.tune.timing.repeats = 5;

  TuningCache cache(d.path, fake_metadata());
  TuningTable first;
  cache.load(first);
  WarmupStats s1 = run_warmup(plan, ops, first, opt);
  EXPECT_EQ(s1.items, plan.items.size());
  EXPECT_EQ(s1.buckets, 5u);
  EXPECT_EQ(s1.tuned, 5u);
  EXPECT_EQ(s1.found, 0u);
  EXPECT_EQ(s1.failed, 0u);
  for (int64_t T : {1, 2, 4, 8, 16}) EXPECT_EQ(first.find("synthetic", op.signature(), op.key({T}))->tactic,
                                               op.expected_best(T)) << T;
  ASSERT_TRUE(cache.save(first).ok);

  TuningTable second;  // as after a restart
  EXPECT_EQ(cache.load(second).entries, 5u);
  int runs_before = op.runs();
  WarmupStats s2 = run_warmup(plan, ops, second, opt);
  EXPECT_EQ(s2.tuned, 0u);
  EXPECT_EQ(s2.found, 5u);
  EXPECT_EQ(op.runs() - runs_before, 5);  // one warm run of the chosen tactic per bucket
  EXPECT_EQ(second.ours_count(), 0u);
  // The run-time lookup now uses the tuned tactics.
  for (int64_t T : {3, 9, 16}) EXPECT_EQ(second.tactic_for(op, {T}, 16), op.expected_best(token_bucket(T, 16)));

  // --force tunes again.
  opt.force = true;
  WarmupStats s3 = run_warmup(plan, ops, second, opt);
  EXPECT_EQ(s3.tuned, 5u);
  EXPECT_EQ(s3.found, 0u);
}

TEST(TuneWarmup, StaleCachedTacticIsTunedAgain) {
  SyntheticOp::Config cfg;
  cfg.name = "stale_warmup_op";
  cfg.unit_us = 1;
  SyntheticOp op(cfg);
  std::vector<TunableOp*> ops{&op};
  WarmupPlan plan = build_warmup_plan(ops, {.max_batched_tokens = 2, .max_seqs = 1});
  TuningTable t;
  TunedEntry stale;
  stale.tactic = 1;
  stale.description = "splits=8";  // id 1 is "variant 1" now
  t.load_entry("stale_warmup_op", op.signature(), op.key({1}), stale);
  TunedEntry good;
  good.tactic = 0;
  good.description = "variant 0";
  t.load_entry("stale_warmup_op", op.signature(), op.key({2}), good);
  WarmupStats s = run_warmup(plan, ops, t, {});
  EXPECT_EQ(s.tuned, 1u);
  EXPECT_EQ(s.found, 1u);
  EXPECT_NE(t.find("stale_warmup_op", op.signature(), op.key({1}))->description, "splits=8");
}

TEST(TuneWarmup, FailedBucketsAreCountedNotCached) {
  class AlwaysFails : public SyntheticOp {
    std::string name() const override { return "always_fails"; }
    void run(int, const Dims&) override { dsa::fail("no kernel for this shape (simulated)"); }
  } op;
  std::vector<TunableOp*> ops{&op};
  WarmupPlan plan = build_warmup_plan(ops, {.max_batched_tokens = 2, .max_seqs = 2});
  TuningTable t;
  testing::internal::CaptureStderr();
  WarmupStats s = run_warmup(plan, ops, t, {});
  testing::internal::GetCapturedStderr();
  EXPECT_EQ(s.failed, 2u);
  EXPECT_EQ(s.tuned, 0u);
  EXPECT_EQ(s.errors.size(), 2u);
  EXPECT_EQ(t.size(), 0u);
}

TEST(TuneFamilies, RegistryListsTheKernelFamilies) {
  const auto& f = tunable_families();
  ASSERT_GE(f.size(), 2u);
  EXPECT_EQ(f[0].name, "sparse_mla_decode");
  auto ops = make_tunable_ops(load_plan_model("glm-5.1"), {}, 0);
  size_t missing = 0;
  for (const auto& fam : f) missing += fam.make ? 0 : 1;
  EXPECT_EQ(ops.notes.size(), missing);
}

TEST(TuneProgress, RendersBarCountsAndPercent) {
  EXPECT_EQ(ProgressBar::render(0, 10, 10), "[----------]  0/10   0%");
  EXPECT_EQ(ProgressBar::render(5, 10, 10), "[#####-----]  5/10  50%");
  EXPECT_EQ(ProgressBar::render(10, 10, 10), "[##########] 10/10 100%");
  EXPECT_EQ(ProgressBar::render(0, 0, 4), "[####] 0/0 100%");
}
