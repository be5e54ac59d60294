// Batch validation: segments, consecutive positions, limits, and the messages naming the culprit.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/testing.h"
#include "dsa/core/error.h"
#include "dsa/kv/batch.h"

using dsa::test::error_of;

namespace dsa::kv {
namespace {

TEST(Batch, SegmentsOfDecodePlusPrefillChunk) {
  Batch b;
  const std::vector<int32_t> one{7}, other{9}, chunk{1, 2, 3, 4};
  b.add(10, 41, one);    // decode
  b.add(11, 5, other);   // decode
  b.add(12, 0, chunk);   // prefill chunk
  ASSERT_EQ(b.num_tokens(), 6);
  EXPECT_EQ(b.position, (std::vector<int64_t>{41, 5, 0, 1, 2, 3}));
  EXPECT_EQ(b.token, (std::vector<int32_t>{7, 9, 1, 2, 3, 4}));
  auto s = b.segments();
  ASSERT_EQ(s.size(), 3u);
  EXPECT_EQ(s[0].id, 10);
  EXPECT_EQ(s[0].first, 0);
  EXPECT_EQ(s[0].count, 1);
  EXPECT_EQ(s[0].end(), 42);
  EXPECT_EQ(s[2].id, 12);
  EXPECT_EQ(s[2].first, 2);
  EXPECT_EQ(s[2].count, 4);
  EXPECT_EQ(s[2].start, 0);
  EXPECT_EQ(s[2].end(), 4);
  EXPECT_TRUE(Batch{}.segments().empty());
}

TEST(Batch, RejectsBrokenPositionsAndSplitRequests) {
  Batch gap;
  gap.request = {1, 1, 1};
  gap.position = {3, 4, 6};
  EXPECT_EQ(error_of([&] { gap.validate(); }),
            "batch: token 2 of request 1 has position 6 but the request's previous token is at 4 (positions of a "
            "request must be consecutive)");
  Batch backwards;
  backwards.request = {1, 1};
  backwards.position = {3, 3};
  EXPECT_NE(error_of([&] { backwards.validate(); }).find("token 1 of request 1 has position 3"), std::string::npos);

  Batch split;
  split.add_positions(1, 0, 2);
  split.add_positions(2, 0, 1);
  split.add_positions(1, 2, 1);
  EXPECT_EQ(error_of([&] { split.validate(); }),
            "batch: request 1 appears again at token 3 (the tokens of a request must be contiguous)");

  Batch negative = [] {
    Batch b;
    b.add_positions(4, -1, 1);
    return b;
  }();
  EXPECT_EQ(error_of([&] { negative.validate(); }), "batch: token 0 (request 4) has position -1 (must be in [0, 2147483647))");

  Batch sizes;
  sizes.request = {1, 1};
  sizes.position = {0};
  EXPECT_EQ(error_of([&] { sizes.validate(); }), "batch: 1 positions for 2 tokens");
  sizes.position = {0, 1};
  sizes.token = {5};
  EXPECT_EQ(error_of([&] { sizes.validate(); }), "batch: 1 token ids for 2 tokens (give one per token or none)");

  Batch mixed;
  mixed.add_positions(1, 0, 1);
  EXPECT_EQ(error_of([&] { mixed.add(2, 0, std::vector<int32_t>{1}); }),
            "Batch::add: the batch already holds 1 tokens without ids");
}

TEST(Batch, Limits) {
  Batch b;
  const std::vector<int32_t> ids{0, 5, 99};
  b.add(1, 100, ids);
  b.add(2, 0, std::vector<int32_t>{3});
  BatchLimits lim;
  EXPECT_NO_THROW(b.validate(lim));
  lim.max_tokens = 3;
  EXPECT_EQ(error_of([&] { b.validate(lim); }), "batch: 4 tokens exceed max_tokens = 3");
  lim = {};
  lim.max_requests = 1;
  EXPECT_EQ(error_of([&] { b.validate(lim); }), "batch: 2 requests exceed max_requests = 1");
  lim = {};
  lim.max_position = 102;
  EXPECT_EQ(error_of([&] { b.validate(lim); }), "batch: token 2 (request 1) has position 102 (must be in [0, 102))");
  lim = {};
  lim.vocab_size = 99;
  EXPECT_EQ(error_of([&] { b.validate(lim); }), "batch: token 2 (request 1) has id 99 (must be in [0, 99))");
  lim.vocab_size = 100;
  EXPECT_NO_THROW(b.validate(lim));
}

}  // namespace
}  // namespace dsa::kv
