#include "dsa/attention/plan.h"

#include <fmt/format.h>

#include "dsa/core/error.h"
#include "dsa/formats/kv_cache_ops.h"
#include "dsa/formats/kv_layout.h"

namespace dsa::attn {

KvCacheDtype resolve_kv_cache_dtype(KvCacheDtype requested, const AttentionLayerSpec& layer) {
  return is_kv_cache_dtype_alias(requested) ? layer.model_kv_dtype : requested;
}

namespace {

int page_size_for(const CacheSpec& c, int block_size, LayerKind kind) {
  if (block_size % c.ratio != 0)
    fail("block_size {} does not hold whole {} {} entries (one per {} tokens): use a multiple of {}", block_size,
         layer_kind_name(kind), cache_role_name(c.role), c.ratio, c.ratio);
  return block_size / c.ratio;
}

}  // namespace

std::vector<LayerPlan> plan_attention(const std::vector<AttentionLayerSpec>& layers, const PlanOptions& opt,
                                      const AttentionBackendRegistry& registry) {
  DSA_CHECK(opt.block_size > 0, "block_size {} must be > 0", opt.block_size);
  std::vector<LayerPlan> out;
  for (const AttentionLayerSpec& spec : layers) {
    LayerPlan lp;
    lp.spec = spec;
    AttentionQuery& q = lp.query;
    q.capability = opt.capability;
    q.build_has_cuda = opt.build_has_cuda;
    q.build_cuda_archs = opt.build_cuda_archs;
    q.dtype = opt.dtype;
    q.kv_cache_dtype = resolve_kv_cache_dtype(opt.kv_cache_dtype, spec);
    q.head_size = spec.head_size;
    q.v_head_size = spec.v_head_size;
    q.num_heads = spec.num_heads;
    q.mla = true;
    q.sparse = true;
    q.sink = spec.sink;
    std::vector<int> pages;
    for (const CacheSpec& c : spec.caches) {
      int p = page_size_for(c, opt.block_size, spec.kind);
      pages.push_back(p);
      if (c.attention_read) q.page_sizes.push_back(p);
    }
    SelectOptions so = opt.select;
    so.log = false;
    lp.selection = evaluate_attention_backends(q, so, registry);

    if (const AttentionBackend* b = lp.selection.backend) {
      for (size_t i = 0; i < spec.caches.size(); ++i) {
        const CacheSpec& c = spec.caches[i];
        CachePlan cp;
        cp.spec = c;
        cp.page_size = pages[i];
        if (c.attention_read) {
          KvCacheShape s = b->kv_cache_shape(1, cp.page_size, q.kv_cache_dtype, q.head_size);
          cp.layout = std::string(kv_cache_dtype_name(q.kv_cache_dtype));
          cp.page_bytes = s.page_bytes;
          cp.page_shape = s.dims;
        } else {
          cp.layout = std::string(formats::kv_format_name(formats::KvFormat::Indexer));  // 128 e4m3 + fp32 scale per entry
          cp.page_bytes = kv::indexer::page_bytes(cp.page_size);
          cp.page_shape = {1, static_cast<int64_t>(cp.page_bytes)};
        }
        cp.bytes_per_entry = static_cast<double>(cp.page_bytes) / cp.page_size;
        if (c.window_bounded) {
          // Positions [pos - window + 1, pos] span at most ceil((window - 1) / P) + 1 pages.
          cp.max_live_pages = (spec.window - 1 + cp.page_size - 1) / cp.page_size + 1;
        } else {
          cp.bytes_per_token = cp.bytes_per_entry / c.ratio;
          lp.bytes_per_token += cp.bytes_per_token;
        }
        lp.caches.push_back(std::move(cp));
      }
    }
    out.push_back(std::move(lp));
  }
  return out;
}

}  // namespace dsa::attn
