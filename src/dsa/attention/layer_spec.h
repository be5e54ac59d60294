// What one attention layer type of a model asks of the attention subsystem: head count, key and
// value widths, top-k, sink, and the paged caches it reads or fills. Model code fills these in
// (model/config.h: ModelConfig::attention_layers()); the selector and `dsa select` consume them.
// This header sits below model/ and knows nothing about model configs.
//
// Layer types (docs/model-reference.md §1-§3):
//   sliding     DeepSeek-V4 compress ratio 0: attends the last `window` tokens (SWA cache) only
//   csa         DeepSeek-V4 ratio 4: SWA cache + top-k compressed entries chosen by the indexer
//   hca         DeepSeek-V4 ratio 128: SWA cache + every compressed entry so far
//   mla_sparse  GLM-5.1: absorbed MLA (d_qk 576) over the latent cache, indexer top-k 2048
#pragma once
#include <string>
#include <string_view>
#include <vector>

#include "dsa/attention/kv_cache_dtype.h"

namespace dsa::attn {

enum class LayerKind { Sliding, Csa, Hca, MlaSparse };
std::string_view layer_kind_name(LayerKind k);

// One paged cache a layer type needs.
enum class CacheRole {
  SlidingWindow,  // V4: per-token KV of the last `window` tokens (pages behind the window are freed)
  Compressed,     // V4: one entry per `ratio` tokens (CSA m=4, HCA m=128)
  Latent,         // GLM: per-token MLA latent [512 | 64 rope]
  IndexerKeys,    // indexer key cache: 128 e4m3 + fp32 scale per entry (not read by attention)
};
std::string_view cache_role_name(CacheRole r);

struct CacheSpec {
  CacheRole role = CacheRole::Latent;
  int ratio = 1;               // tokens per entry (1 for per-token caches)
  bool attention_read = true;  // read by the attention kernel (layout comes from the backend)
  bool window_bounded = false; // only the last `window` tokens stay live
  int layers = 0;              // how many layers of this type hold this cache
};

struct AttentionLayerSpec {
  LayerKind kind = LayerKind::MlaSparse;
  int num_layers = 0;      // main-model layers of this type
  int num_mtp_layers = 0;  // MTP (next-token-prediction) layers of this type
  int num_heads = 0;       // query heads (one shared KV head: MQA over the latent)
  int head_size = 0;       // d_qk
  int v_head_size = 0;     // d_v (output width per head)
  int window = 0;          // sliding window (V4), 0 = none
  int compress_ratio = 0;  // V4: 0, 4, 128; GLM: 0
  int topk = 0;            // indexer top-k (csa, mla_sparse); 0 = no indexer selection
  bool attends_all_compressed = false;  // hca
  bool sink = false;       // per-head learned sink logit in the softmax denominator
  KvCacheDtype model_kv_dtype = KvCacheDtype::Fp8DsMla;  // what `auto` / `fp8` mean for this model
  std::vector<CacheSpec> caches;
};

}  // namespace dsa::attn
