#include "dsa/engine/cache_groups.h"

#include <algorithm>

#include <fmt/format.h>

#include "dsa/core/error.h"
#include "dsa/model/config.h"

namespace dsa::engine {

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

namespace {

attn::LayerKind v4_kind(int ratio) {
  return ratio == 0 ? attn::LayerKind::Sliding : ratio == 4 ? attn::LayerKind::Csa : attn::LayerKind::Hca;
}

std::string group_name(int ratio, int window) {
  if (window > 0) return "swa";
  return ratio == 1 ? "tokens" : fmt::format("c{}", ratio);
}

}  // namespace

std::vector<CacheGroupSpec> kv_cache_groups(const model::ModelConfig& config, const std::vector<attn::LayerPlan>& plans) {
  const bool v4 = config.arch == model::Arch::DeepseekV4;
  const int L = config.num_layers, M = config.num_mtp_layers;
  std::vector<CacheGroupSpec> groups;

  auto find_plan = [&](attn::LayerKind kind) -> size_t {
    for (size_t i = 0; i < plans.size(); ++i)
      if (plans[i].spec.kind == kind) {
        DSA_CHECK(plans[i].selection.backend != nullptr, "KV caches of {}: no attention backend for {} layers: {}",
                  config.name, attn::layer_kind_name(kind), plans[i].selection.error);
        return i;
      }
    fail("KV caches of {}: the attention plan has no {} layer type", config.name, attn::layer_kind_name(kind));
  };

  std::vector<std::vector<int>> made(plans.size());
  for (size_t i = 0; i < plans.size(); ++i) made[i].assign(plans[i].caches.size(), 0);

  for (int layer = 0; layer < L + M; ++layer) {
    const bool mtp = layer >= L;
    attn::LayerKind kind = attn::LayerKind::MlaSparse;
    if (v4) kind = v4_kind(mtp ? config.mtp_compress_ratios.at(layer - L) : config.compress_ratios.at(layer));
    const size_t pi = find_plan(kind);
    const attn::LayerPlan& lp = plans[pi];
    for (size_t ci = 0; ci < lp.caches.size(); ++ci) {
      const attn::CachePlan& cp = lp.caches[ci];
      // GLM "shared" layers reuse a previous layer's top-k: no indexer keys of their own.
      if (!v4 && cp.spec.role == attn::CacheRole::IndexerKeys && !mtp && config.indexer_types.at(layer) != "full")
        continue;
      const int window = cp.spec.window_bounded ? lp.spec.window : 0;
      auto g = std::find_if(groups.begin(), groups.end(), [&](const CacheGroupSpec& x) {
        return x.ratio == cp.spec.ratio && x.page_size == cp.page_size && x.window == window;
      });
      if (g == groups.end()) {
        CacheGroupSpec n;
        n.name = group_name(cp.spec.ratio, window);
        n.ratio = cp.spec.ratio;
        n.page_size = cp.page_size;
        n.window = window;
        groups.push_back(std::move(n));
        g = groups.end() - 1;
      }
      g->max_live_pages = std::max(g->max_live_pages, cp.max_live_pages);
      g->pools.push_back(KvPoolSpec{layer, cp.spec.role, cp.layout, cp.page_bytes});
      ++made[pi][ci];
    }
  }
  for (size_t i = 0; i < plans.size(); ++i)
    for (size_t ci = 0; ci < plans[i].caches.size(); ++ci)
      DSA_CHECK(made[i][ci] == plans[i].caches[ci].spec.layers,
                "KV caches of {}: the plan counts {} {} {} caches but the config's layers give {}", config.name,
                plans[i].caches[ci].spec.layers, attn::layer_kind_name(plans[i].spec.kind),
                attn::cache_role_name(plans[i].caches[ci].spec.role), made[i][ci]);
  for (const CacheGroupSpec& g : groups) g.validate();
  return groups;
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

}  // namespace dsa::engine
