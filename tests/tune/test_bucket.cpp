// Bucketing of token counts and other dims, and the shape keys stored in the cache.
#include "common/testing.h"
#include "dsa/tune/bucket.h"
#include "dsa/tune/synthetic_op.h"

using namespace dsa;
using namespace dsa::tune;

TEST(TuneBucket, TokenBucketsArePowersOfTwoUpToTheMax) {
  EXPECT_EQ(token_buckets(1), (std::vector<int64_t>{1}));
  EXPECT_EQ(token_buckets(2), (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(token_buckets(16), (std::vector<int64_t>{1, 2, 4, 8, 16}));
  // A max that is not a power of two is itself the last bucket.
  EXPECT_EQ(token_buckets(3000), (std::vector<int64_t>{1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 3000}));
  EXPECT_EQ(token_buckets(8192).size(), 14u);
  EXPECT_THROW(token_buckets(0), Error);
}

TEST(TuneBucket, TokenCountsRoundUpAndClamp) {
  EXPECT_EQ(token_bucket(1, 8192), 1);
  EXPECT_EQ(token_bucket(3, 8192), 4);
  EXPECT_EQ(token_bucket(4, 8192), 4);
  EXPECT_EQ(token_bucket(5, 8192), 8);
  EXPECT_EQ(token_bucket(8191, 8192), 8192);
  EXPECT_EQ(token_bucket(9000, 8192), 8192);   // clamped
  EXPECT_EQ(token_bucket(2049, 3000), 3000);   // next pow2 (4096) clamps to the max
  EXPECT_EQ(token_bucket(2048, 3000), 2048);
  EXPECT_THROW(token_bucket(0, 16), Error);
  EXPECT_THROW(token_bucket(-3, 16), Error);
  // Every count maps to one of the buckets.
  for (int64_t max : {1, 7, 64, 3000}) {
    auto b = token_buckets(max);
    for (int64_t t = 1; t <= max + 5; ++t)
      EXPECT_NE(std::find(b.begin(), b.end(), token_bucket(t, max)), b.end()) << t << " of " << max;
  }
}

namespace {
// An op with a second dynamic dim bucketed to multiples of 256 (e.g. a key count).
class TwoDimOp : public SyntheticOp {
 public:
  TwoDimOp() : SyntheticOp(Config{.name = "two_dim", .signature = "s", .instance = "h64.d576"}) {}
  std::vector<std::string> dim_names() const override { return {"tokens", "keys"}; }
  int64_t bucket_dim(size_t, int64_t v) const override { return (v + 255) / 256 * 256; }
};
}  // namespace

TEST(TuneBucket, KeysNameInstanceAndBucketedDims) {
  TwoDimOp op;
  Dims b = op.bucket({5, 1000}, 8192);
  EXPECT_EQ(b, (Dims{8, 1024}));
  EXPECT_EQ(op.key(b), "h64.d576|tokens=8,keys=1024");
  EXPECT_EQ(op.key(op.bucket({7, 769}, 8192)), op.key(op.bucket({6, 1001}, 8192)));
  EXPECT_NE(op.key(op.bucket({7, 1025}, 8192)), op.key(b));
  EXPECT_THROW(op.bucket({5}, 8192), Error);           // wrong number of dims
  EXPECT_THROW(op.bucket({5, 0}, 8192), Error);        // non-positive dim
  SyntheticOp plain;
  EXPECT_EQ(plain.key(plain.bucket({100}, 64)), "tokens=64");
  EXPECT_EQ(next_pow2(1), 1);
  EXPECT_EQ(next_pow2(1025), 2048);
}
