#include "dsa/tune/bucket.h"

#include "dsa/core/error.h"

namespace dsa::tune {

int64_t next_pow2(int64_t value) {
  DSA_CHECK(value >= 1, "next_pow2: value must be >= 1, got {}", value);
  DSA_CHECK(value <= (int64_t{1} << 62), "next_pow2: value {} too large", value);
  int64_t p = 1;
  while (p < value) p <<= 1;
  return p;
}

std::vector<int64_t> token_buckets(int64_t max_tokens) {
  DSA_CHECK(max_tokens >= 1, "max batched tokens must be >= 1, got {}", max_tokens);
  std::vector<int64_t> b;
  for (int64_t p = 1; p < max_tokens; p <<= 1) b.push_back(p);
  b.push_back(max_tokens);
  return b;
}

int64_t token_bucket(int64_t tokens, int64_t max_tokens) {
  DSA_CHECK(max_tokens >= 1, "max batched tokens must be >= 1, got {}", max_tokens);
  DSA_CHECK(tokens >= 1, "token count must be >= 1, got {}", tokens);
  if (tokens >= max_tokens) return max_tokens;
  return std::min(next_pow2(tokens), max_tokens);
}

}  // namespace dsa::tune
