#include "dsa/kv/cache_spec.h"

#include <algorithm>

#include <fmt/format.h>

#include "dsa/core/error.h"

namespace dsa::kv {

size_t CacheGroupSpec::page_bytes() const {
  size_t b = 0;
  for (const KvPoolSpec& p : pools) b += p.page_bytes;
  return b;
}

void CacheGroupSpec::validate() const {
  DSA_CHECK(ratio >= 1, "cache group '{}': ratio = {} (must be >= 1)", name, ratio);
  DSA_CHECK(page_size >= 1, "cache group '{}': page_size = {} (must be >= 1)", name, page_size);
  DSA_CHECK(window >= 0, "cache group '{}': window = {} (must be >= 0)", name, window);
  DSA_CHECK(window == 0 || ratio == 1, "cache group '{}': window = {} needs ratio 1, got ratio {}", name, window, ratio);
  DSA_CHECK(!pools.empty(), "cache group '{}' has no pools", name);
  for (const KvPoolSpec& p : pools)
    DSA_CHECK(p.page_bytes > 0, "cache group '{}': pool of layer {} ({}) has page_bytes = 0", name, p.layer,
              attn::cache_role_name(p.role));
}

void StatePoolSpec::validate() const {
  DSA_CHECK(layer >= 0, "state pool '{}': layer = {} (must be >= 0)", name, layer);
  DSA_CHECK(slot_bytes > 0 && slot_bytes % 16 == 0, "state pool '{}' of layer {}: slot_bytes = {} (must be a positive "
            "multiple of 16)", name, layer, slot_bytes);
}

double KvRequirements::bytes_per_token() const {
  double b = 0;
  for (const CacheGroupSpec& g : groups)
    if (g.window == 0) b += static_cast<double>(g.page_bytes()) / (static_cast<double>(g.page_size) * g.ratio);
  return b;
}

size_t KvRequirements::bytes_per_request() const {
  size_t b = 0;
  for (const CacheGroupSpec& g : groups)
    if (g.window > 0) b += static_cast<size_t>(g.max_live_pages) * g.page_bytes();
  for (const StatePoolSpec& s : states) b += s.slot_bytes;
  return b;
}

void KvRequirements::validate() const {
  DSA_CHECK(!groups.empty(), "KV requirements: no cache groups");
  DSA_CHECK(block_size >= 1, "KV requirements: block_size = {} (must be >= 1)", block_size);
  for (const CacheGroupSpec& g : groups) {
    g.validate();
    DSA_CHECK(g.window > 0 || g.page_size * g.ratio == block_size,
              "KV requirements: group '{}' pages cover {} tokens ({} entries x ratio {}), the block size is {}", g.name,
              g.page_size * g.ratio, g.page_size, g.ratio, block_size);
  }
  for (size_t i = 0; i < states.size(); ++i) {
    states[i].validate();
    for (size_t j = 0; j < i; ++j)
      DSA_CHECK(states[j].layer != states[i].layer || states[j].name != states[i].name,
                "KV requirements: layer {} declares state '{}' twice", states[i].layer, states[i].name);
  }
}

// A registered request whose next position is s holds, after the trim at the start of a step,
// the pages covering positions [max(s - W + 1, 0), s + n - 1] (n = its tokens in the step, 0 when
// not scheduled). An interval of length len touches at most floor((len - 1) / P) + 2 pages, and
// len - 1 <= n + W - 2; summing over R requests with sum(n) <= T gives
// floor((T + R * (W - 2)) / P) + 2R.
int64_t window_group_pages(const CacheGroupSpec& g, int max_requests, int64_t max_step_tokens) {
  DSA_CHECK(g.window > 0, "window_group_pages: group '{}' has no window", g.name);
  DSA_CHECK(max_requests > 0, "KV manager: max_requests = {} (must be > 0 to size the '{}' window cache)", max_requests,
            g.name);
  DSA_CHECK(max_step_tokens > 0, "KV manager: max_step_tokens = {} (must be > 0 to size the '{}' window cache)",
            max_step_tokens, g.name);
  const int64_t span = max_step_tokens + static_cast<int64_t>(max_requests) * std::max(g.window - 2, 0);
  return span / g.page_size + 2 * static_cast<int64_t>(max_requests);
}

}  // namespace dsa::kv
