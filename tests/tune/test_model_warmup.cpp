// Start-up tuning (model_warmup.h) on a synthetic CPU op: the first start tunes and saves, the
// next start finds everything in the cache; --no-tune does no work on the op and uses the cache
// only; the time bound leaves the remaining buckets to the default tactic.
#include "common/testing.h"
#include "dsa/tune/bucket.h"
#include "dsa/tune/model_warmup.h"
#include "dsa/tune/synthetic_op.h"
#include "tune/tune_test_util.h"

using namespace dsa;
using namespace dsa::tune;
using namespace dsa::tune::test;

namespace {
ModelWarmupOptions quick(bool tune) {
  ModelWarmupOptions o;
  o.tune = tune;
  o.max_seconds = 0;
  o.timing.warmups = 1;
  o.timing.repeats = 3;
  return o;
}
}  // namespace

TEST(TuneModelWarmup, TunesOnceThenFindsEverythingAfterARestart) {
  TempDir d;
  SyntheticOp::Config cfg;
  cfg.name = "warmup_restart_op";
  cfg.unit_us = 10;
  SyntheticOp op(cfg);
  std::vector<TunableOp*> ops{&op};
  const EngineLimits limits{16, 1};  // buckets 1, 2, 4, 8, 16
  TuningCache cache(d.path, fake_metadata());

  TuningTable first;
  ModelWarmupReport r1 = load_and_tune_ops(ops, limits, cache, first, quick(true));
  EXPECT_EQ(r1.ops, 1u);
  EXPECT_EQ(r1.buckets, 5u);
  EXPECT_EQ(r1.tuned, 5u);
  EXPECT_EQ(r1.found, 0u);
  EXPECT_EQ(r1.skipped, 0u);
  EXPECT_EQ(r1.failed, 0u);
  EXPECT_TRUE(r1.saved) << r1.save_error;
  EXPECT_TRUE(std::filesystem::exists(r1.cache_path)) << r1.cache_path;
  EXPECT_NE(r1.summary().find("5 bucket(s) of 1 op(s): 0 from the cache, 5 tuned, 0 skipped"), std::string::npos)
      << r1.summary();

  TuningTable second;  // a restart
  const int runs = op.runs();
  ModelWarmupReport r2 = load_and_tune_ops(ops, limits, cache, second, quick(true));
  EXPECT_EQ(r2.found, 5u);
  EXPECT_EQ(r2.tuned, 0u);
  EXPECT_FALSE(r2.saved);  // nothing new to write
  EXPECT_EQ(op.runs() - runs, 5);  // one warm-up launch per bucket
  for (int64_t T : {1, 3, 16}) EXPECT_EQ(second.tactic_for(op, {T}, 16), op.expected_best(token_bucket(T, 16)));

  TuningTable third;  // --no-tune: the cache only, nothing runs
  const int runs2 = op.runs();
  ModelWarmupReport r3 = load_and_tune_ops(ops, limits, cache, third, quick(false));
  EXPECT_EQ(r3.found, 5u);
  EXPECT_EQ(r3.tuned, 0u);
  EXPECT_EQ(op.runs(), runs2);
  EXPECT_EQ(third.size(), 5u);
}

TEST(TuneModelWarmup, NoTuneWithAnEmptyCacheSkipsEverythingAndWritesNothing) {
  TempDir d;
  SyntheticOp op;
  std::vector<TunableOp*> ops{&op};
  TuningCache cache(d.path, fake_metadata());
  TuningTable table;
  ModelWarmupReport r = load_and_tune_ops(ops, {8, 1}, cache, table, quick(false));
  EXPECT_EQ(r.buckets, 4u);
  EXPECT_EQ(r.skipped, 4u);
  EXPECT_EQ(r.found + r.tuned + r.failed, 0u);
  EXPECT_EQ(op.runs(), 0);
  EXPECT_EQ(table.size(), 0u);
  EXPECT_FALSE(std::filesystem::exists(cache.primary_path()));
}

TEST(TuneModelWarmup, TimeBoundLeavesTheRestToTheDefault) {
  TempDir d;
  SyntheticOp::Config cfg;
  cfg.name = "warmup_budget_op";
  cfg.unit_us = 2000;  // one bucket: 4 tactics x 4 runs x >= 2 ms, far above the bound
  SyntheticOp op(cfg);
  std::vector<TunableOp*> ops{&op};
  TuningCache cache(d.path, fake_metadata());
  TuningTable table;
  ModelWarmupOptions o = quick(true);
  o.max_seconds = 0.02;
  ModelWarmupReport r = load_and_tune_ops(ops, {16, 1}, cache, table, o);
  EXPECT_EQ(r.buckets, 5u);
  EXPECT_EQ(r.tuned, 1u);  // the first bucket starts within the bound and is finished
  EXPECT_EQ(r.skipped, 4u);
  EXPECT_TRUE(r.saved) << r.save_error;
  EXPECT_EQ(table.size(), 1u);
  // The next start tunes only what is missing.
  TuningTable next;
  o.max_seconds = 0;
  o.timing.repeats = 1;
  ModelWarmupReport r2 = load_and_tune_ops(ops, {16, 1}, cache, next, o);
  EXPECT_EQ(r2.found, 1u);
  EXPECT_EQ(r2.tuned, 4u);
}

TEST(TuneModelWarmup, OptionsAreValidated) {
  ModelWarmupOptions o;
  o.max_seconds = -1;
  EXPECT_THROW(o.validate(), Error);
  o.max_seconds = 0;
  o.timing.repeats = 0;
  EXPECT_THROW(o.validate(), Error);
}
