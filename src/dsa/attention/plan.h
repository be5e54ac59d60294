// Attention plan of a model: for each attention layer type, the backend chosen for the platform,
// the page size and byte geometry of every cache that layer type needs, and the KV bytes per
// context token. This is what `dsa select` prints and what the KV manager will allocate from.
//
// Page sizes from the block size N (tokens per logical block, docs/kv-cache.md):
// per-token caches (V4 SWA, GLM latent) use pages of N tokens; a compressed cache of ratio m
// holds N/m entries per page (V4 CSA N/4, HCA N/128), as does the V4 indexer cache (N/4).
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "dsa/attention/backend.h"
#include "dsa/attention/layer_spec.h"
#include "dsa/attention/selector.h"

namespace dsa::attn {

struct CachePlan {
  CacheSpec spec;
  std::string layout;          // "fp8_model1", "fp8_ds_mla", "bf16" or "indexer_fp8"
  int page_size = 0;           // entries per page
  size_t page_bytes = 0;
  double bytes_per_entry = 0;  // page_bytes / page_size (includes page padding)
  double bytes_per_token = 0;  // per token of context: bytes_per_entry / ratio (0 when window-bounded)
  int max_live_pages = 0;      // window-bounded caches: pages one request holds at most
  std::vector<int64_t> page_shape;  // kv_cache_shape(1 page) of the backend (attention-read caches)
};

struct LayerPlan {
  AttentionLayerSpec spec;
  AttentionQuery query;
  Selection selection;           // selection.backend == nullptr: nothing fits (selection.error)
  std::vector<CachePlan> caches; // filled when a backend was chosen
  double bytes_per_token = 0;    // sum over caches, per layer
};

struct PlanOptions {
  std::optional<Capability> capability;  // nullopt = CPU platform
  bool build_has_cuda = kBuildHasCuda;
  std::optional<std::vector<std::string>> build_cuda_archs;  // see AttentionQuery
  DType dtype = DType::BF16;
  KvCacheDtype kv_cache_dtype = KvCacheDtype::Auto;
  int block_size = 0;                    // tokens per logical block (> 0)
  SelectOptions select;
};

// `auto` and `fp8` become the layer's own FP8 layout; concrete names pass through.
KvCacheDtype resolve_kv_cache_dtype(KvCacheDtype requested, const AttentionLayerSpec& layer);

// Plans every layer type. Throws dsa::Error for a block size that does not hold whole
// compressed entries, an unknown forced backend or an empty registry; a layer type that no
// backend serves is reported in its LayerPlan (selection.backend == nullptr), not thrown.
std::vector<LayerPlan> plan_attention(const std::vector<AttentionLayerSpec>& layers, const PlanOptions& options,
                                      const AttentionBackendRegistry& registry = attention_backend_registry());

}  // namespace dsa::attn
