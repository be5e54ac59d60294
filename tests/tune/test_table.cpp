// Run-time lookup: tuned buckets give their tactic, untuned ones the default with one warning
// per family, and entries from another tactic set are never used.
#include "common/testing.h"
#include "dsa/tune/synthetic_op.h"
#include "dsa/tune/tuning_table.h"

using namespace dsa;
using namespace dsa::tune;

namespace {
TunedEntry entry(int tactic) {
  TunedEntry e;
  e.tactic = tactic;
  e.description = fmt::format("variant {}", tactic);
  e.us = 1;
  return e;
}
int count(const std::string& hay, const std::string& needle) {
  int n = 0;
  for (size_t p = hay.find(needle); p != std::string::npos; p = hay.find(needle, p + 1)) ++n;
  return n;
}
}  // namespace

TEST(TuneTable, LookupUsesTunedBucketAndFallsBackWithOneWarning) {
  // Family names are unique to this test: warn-once state is per process.
  SyntheticOp op(SyntheticOp::Config{.name = "lookup_once_op", .signature = "sig-a"});
  TuningTable t;
  t.set("lookup_once_op", "sig-a", op.key({4}), entry(3));
  testing::internal::CaptureStderr();
  EXPECT_EQ(t.tactic_for(op, {3}, 64), 3);   // 3 -> bucket 4
  EXPECT_EQ(t.tactic_for(op, {4}, 64), 3);
  EXPECT_EQ(t.tactic_for(op, {5}, 64), kDefaultTactic);  // bucket 8: never tuned
  EXPECT_EQ(t.tactic_for(op, {8}, 64), kDefaultTactic);
  EXPECT_EQ(t.tactic_for(op, {64}, 64), kDefaultTactic);  // another untuned bucket: no new warning
  std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(count(err, "lookup_once_op has no tuned tactic"), 1) << err;
  EXPECT_NE(err.find("no tuned tactic for tokens=8 "), std::string::npos) << err;
  EXPECT_NE(err.find("dsa tune"), std::string::npos) << err;
}

TEST(TuneTable, OtherSignatureIsNeverUsed) {
  SyntheticOp op(SyntheticOp::Config{.name = "lookup_sig_op", .signature = "sig-new"});
  TuningTable t;
  t.load_entry("lookup_sig_op", "sig-old", op.key({1}), entry(2));
  testing::internal::CaptureStderr();
  EXPECT_EQ(t.tactic_for(op, {1}, 64), kDefaultTactic);
  EXPECT_EQ(t.tactic_for(op, {1}, 64), kDefaultTactic);
  std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(count(err, "another tactic set"), 1) << err;
  EXPECT_FALSE(t.find("lookup_sig_op", "sig-new", op.key({1})));
  EXPECT_TRUE(t.find("lookup_sig_op", "sig-old", op.key({1})));
  // Tuning under the new signature replaces the family's old entries.
  t.set("lookup_sig_op", "sig-new", op.key({2}), entry(1));
  EXPECT_FALSE(t.find("lookup_sig_op", "sig-old", op.key({1})));
  EXPECT_EQ(t.tactic_for(op, {2}, 64), 1);
}

TEST(TuneTable, DiskEntriesNeverReplaceOurs) {
  TuningTable t;
  t.set("f", "s", "k", entry(1));
  t.load_entry("f", "s", "k", entry(2));
  t.load_entry("f", "s", "k2", entry(3));
  t.load_entry("f", "other", "k3", entry(0));  // other signature while we have our own entries
  EXPECT_EQ(t.find("f", "s", "k")->tactic, 1);
  EXPECT_EQ(t.find("f", "s", "k2")->tactic, 3);
  EXPECT_FALSE(t.find("f", "other", "k3"));
  EXPECT_EQ(t.size(), 2u);
  EXPECT_EQ(t.ours_count(), 1u);
}

TEST(TuneTable, StaleTacticUnderAnUnchangedSignatureIsNotUsed) {
  // The op's tactic 1 is "variant 1"; the cache says tactic 1 is "splits=8": the id means
  // something else now, although the signature did not change.
  SyntheticOp op(SyntheticOp::Config{.name = "lookup_stale_op", .signature = "same"});
  TuningTable t;
  TunedEntry stale = entry(1);
  stale.description = "splits=8";
  t.load_entry("lookup_stale_op", "same", op.key({1}), stale);
  t.load_entry("lookup_stale_op", "same", op.key({2}), entry(3));  // valid
  t.load_entry("lookup_stale_op", "same", op.key({4}), entry(9));  // id the op does not have
  testing::internal::CaptureStderr();
  EXPECT_EQ(t.tactic_for(op, {1}, 64), kDefaultTactic);
  EXPECT_EQ(t.tactic_for(op, {1}, 64), kDefaultTactic);
  EXPECT_EQ(t.tactic_for(op, {2}, 64), 3);
  EXPECT_EQ(t.tactic_for(op, {4}, 64), kDefaultTactic);
  std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(count(err, "is not in the op's tactic list"), 2) << err;
  // Re-tuning fixes the key.
  t.set("lookup_stale_op", "same", op.key({1}), entry(0));
  EXPECT_EQ(t.tactic_for(op, {1}, 64), 0);
}

TEST(TuneTable, EngineLimitForLookups) {
  SyntheticOp op(SyntheticOp::Config{.name = "lookup_limit_op", .signature = "s"});
  TuningTable t;
  EXPECT_THROW(t.tactic_for(op, {1}), Error);  // limit not set
  t.set_max_batched_tokens(48);
  t.set("lookup_limit_op", "s", op.key({48}), entry(2));
  EXPECT_EQ(t.tactic_for(op, {33}), 2);   // 33 -> 64 -> clamped to 48
  EXPECT_EQ(t.tactic_for(op, {500}), 2);  // above the limit: clamped
  EXPECT_THROW(t.set_max_batched_tokens(0), Error);
}
