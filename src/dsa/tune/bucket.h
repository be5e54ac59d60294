// Shape buckets for tuning. Token counts go to 1, 2, 4, 8, ... up to the engine's max batched
// tokens: a count is rounded up to the next power of two and clamped to the max, so the max
// itself is the last bucket even when it is not a power of two (max 3000: ..., 2048, 3000).
#pragma once
#include <cstdint>
#include <vector>

namespace dsa::tune {

// Every token bucket an engine with this limit can hit, ascending. Throws when max_tokens < 1.
std::vector<int64_t> token_buckets(int64_t max_tokens);
// Bucket of `tokens` (>= 1; counts above the max clamp to the max).
int64_t token_bucket(int64_t tokens, int64_t max_tokens);
// Smallest power of two >= value (value >= 1).
int64_t next_pow2(int64_t value);

}  // namespace dsa::tune
