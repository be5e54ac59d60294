#include "dsa/model/cache_specs.h"

#include <algorithm>

#include <fmt/format.h>

#include "dsa/core/error.h"

namespace dsa::model {

namespace {

attn::LayerKind v4_kind(int ratio) {
  return ratio == 0 ? attn::LayerKind::Sliding : ratio == 4 ? attn::LayerKind::Csa : attn::LayerKind::Hca;
}

std::string group_name(int ratio, int window) {
  if (window > 0) return "swa";
  return ratio == 1 ? "tokens" : fmt::format("c{}", ratio);
}

}  // namespace

std::vector<kv::CacheGroupSpec> kv_cache_groups(const model::ModelConfig& config, const std::vector<attn::LayerPlan>& plans) {
  const bool v4 = config.arch == Arch::DeepseekV4;
  const int L = config.num_layers, M = config.num_mtp_layers;
  std::vector<kv::CacheGroupSpec> groups;

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
      auto g = std::find_if(groups.begin(), groups.end(), [&](const kv::CacheGroupSpec& x) {
        return x.ratio == cp.spec.ratio && x.page_size == cp.page_size && x.window == window;
      });
      if (g == groups.end()) {
        kv::CacheGroupSpec n;
        n.name = group_name(cp.spec.ratio, window);
        n.ratio = cp.spec.ratio;
        n.page_size = cp.page_size;
        n.window = window;
        groups.push_back(std::move(n));
        g = groups.end() - 1;
      }
      g->max_live_pages = std::max(g->max_live_pages, cp.max_live_pages);
      g->pools.push_back(kv::KvPoolSpec{layer, cp.spec.role, cp.layout, cp.page_bytes});
      ++made[pi][ci];
    }
  }
  for (size_t i = 0; i < plans.size(); ++i)
    for (size_t ci = 0; ci < plans[i].caches.size(); ++ci)
      DSA_CHECK(made[i][ci] == plans[i].caches[ci].spec.layers,
                "KV caches of {}: the plan counts {} {} {} caches but the config's layers give {}", config.name,
                plans[i].caches[ci].spec.layers, attn::layer_kind_name(plans[i].spec.kind),
                attn::cache_role_name(plans[i].caches[ci].spec.role), made[i][ci]);
  for (const kv::CacheGroupSpec& g : groups) g.validate();
  return groups;
}

}  // namespace dsa::model
