// The tuner on a CPU op with known costs: it picks the fastest working tactic per bucket, a
// failing tactic is never chosen and never crashes the process, and tactic checks catch a
// tactic that changes results.
#include <stdexcept>

#include "common/testing.h"
#include "dsa/tune/synthetic_op.h"
#include "dsa/tune/tactic_check.h"
#include "dsa/tune/tuner.h"

using namespace dsa;
using namespace dsa::tune;

namespace {
TuneOptions quick() {
  TuneOptions o;
  o.timing.warmups = 1;
  o.timing.repeats = 7;
  return o;
}
}  // namespace

TEST(TuneTuner, PicksTheFastestTacticPerBucket) {
  SyntheticOp op;  // tactic 2 throws
  for (int64_t T : {1, 2, 4, 8, 16}) {
    BucketResult r = tune_bucket(op, {T}, quick());
    ASSERT_TRUE(r.ok) << r.error;
    EXPECT_EQ(r.entry.tactic, op.expected_best(T)) << "T=" << T;
    EXPECT_NE(r.entry.tactic, 2);
    ASSERT_EQ(r.timings.size(), 5u);
    EXPECT_EQ(r.timings[0].tactic.id, kDefaultTactic);  // default first
    EXPECT_GT(r.entry.default_us, r.entry.us);
    EXPECT_TRUE(r.entry.timings_us["2"].is_null());     // failed tactic recorded as null
    EXPECT_FALSE(r.entry.tuned_at.empty());
  }
}

TEST(TuneTuner, FailingTacticIsNeverChosenEvenWhereItWouldBeFastest) {
  SyntheticOp op;
  // ideal(T) = log2(T) % 4 == 2 at T = 4: the failing tactic would be the fastest there.
  ASSERT_EQ(op.ideal(4), 2);
  BucketResult r = tune_bucket(op, {4}, quick());
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.entry.tactic, 3);  // next cheapest: (3 - 2) mod 4 = 1 -> 3 units
  const TacticTiming* failed = nullptr;
  for (const auto& t : r.timings)
    if (t.tactic.id == 2) failed = &t;
  ASSERT_NE(failed, nullptr);
  EXPECT_FALSE(failed->ok);
  EXPECT_NE(failed->error.find("deliberate failure"), std::string::npos) << failed->error;
}

namespace {
// Throws something that is not a dsa::Error, from every tactic, or from prepare.
class BrokenOp : public SyntheticOp {
 public:
  bool throw_in_prepare = false;
  bool released = false;
  std::string name() const override { return "broken"; }
  void prepare(const Dims& d) override {
    if (throw_in_prepare) throw std::runtime_error("out of memory (simulated)");
    SyntheticOp::prepare(d);
  }
  void run(int, const Dims&) override { throw std::logic_error("kernel refused (simulated)"); }
  void release() override { released = true; }
};
}  // namespace

TEST(TuneTuner, EveryTacticFailingGivesNoEntryAndNoCrash) {
  BrokenOp op;
  BucketResult r = tune_bucket(op, {8}, quick());
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.error.find("every tactic"), std::string::npos) << r.error;
  EXPECT_TRUE(op.released);
  for (const auto& t : r.timings) EXPECT_FALSE(t.ok);
}

TEST(TuneTuner, PrepareFailureIsReportedNotThrown) {
  BrokenOp op;
  op.throw_in_prepare = true;
  BucketResult r = tune_bucket(op, {8}, quick());
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.error.find("out of memory"), std::string::npos) << r.error;
  EXPECT_TRUE(r.timings.empty());
}

TEST(TuneTuner, TacticsToTryPutsTheDefaultFirstAndDropsDuplicates) {
  class Dup : public SyntheticOp {
    std::vector<Tactic> tactics(const Dims&) const override { return {{3, "a"}, {3, "b"}, {1, "c"}}; }
  } op;
  auto t = tactics_to_try(op, {1});
  ASSERT_EQ(t.size(), 3u);
  EXPECT_EQ(t[0].id, kDefaultTactic);
  EXPECT_EQ(t[1].id, 3);
  EXPECT_EQ(t[2].id, 1);
  class Bad : public SyntheticOp {
    std::vector<Tactic> tactics(const Dims&) const override { return {{-5, "bad"}}; }
  } bad;
  EXPECT_THROW(tactics_to_try(bad, {1}), Error);
}

TEST(TuneTuner, MinGainKeepsTheDefaultWhenNothingIsReallyFaster) {
  // With a 99 % required gain nothing beats the default.
  SyntheticOp op;
  TuneOptions o = quick();
  o.min_gain = 0.99;
  BucketResult r = tune_bucket(op, {1}, o);
  ASSERT_TRUE(r.ok);
  EXPECT_EQ(r.entry.tactic, kDefaultTactic);
}

TEST(TuneTacticCheck, EveryTacticMatchesTheReference) {
  SyntheticOp::Config c;
  c.failing_tactic = -2;
  c.unit_us = 1;
  SyntheticOp op(c);
  for (int64_t T : {1, 7, 64}) {
    int64_t expect = T * (T + 1) / 2;
    int calls = 0;
    auto failures = check_all_tactics(op, {T}, [&](const Tactic&) {
      ++calls;
      return op.output() == expect ? std::string() : fmt::format("got {}, want {}", op.output(), expect);
    });
    EXPECT_TRUE(failures.empty()) << describe(failures);
    EXPECT_EQ(calls, 5);
  }
}

TEST(TuneTacticCheck, CatchesAWrongTacticAndAThrowingOne) {
  SyntheticOp::Config c;
  c.failing_tactic = 2;
  c.wrong_tactic = 1;
  c.unit_us = 1;
  SyntheticOp op(c);
  int poisoned = 0;
  auto failures = check_all_tactics(
      op, {5},
      [&](const Tactic&) { return op.output() == 15 ? std::string() : fmt::format("got {}", op.output()); },
      [&] { ++poisoned; });
  EXPECT_EQ(poisoned, 5);
  ASSERT_EQ(failures.size(), 2u) << describe(failures);
  EXPECT_EQ(failures[0].tactic.id, 1);
  EXPECT_EQ(failures[0].message, "got 16");
  EXPECT_EQ(failures[1].tactic.id, 2);
  EXPECT_NE(failures[1].message.find("threw"), std::string::npos);
}
