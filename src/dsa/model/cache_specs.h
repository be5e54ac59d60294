// The cache groups a model declares to the engine (kv/cache_spec.h), from its config and the
// attention plan of its layer types (attn::plan_attention over config.attention_layers()).
// Groups of the supported models (block size N tokens):
//   DeepSeek-V4  "swa"   ratio 1,   N entries/page, window 128: the SWA cache of every layer
//                "c4"    ratio 4,   N/4 entries/page: CSA compressed KV + CSA indexer keys
//                "c128"  ratio 128, N/128 entries/page: HCA compressed KV
//   GLM-5.1      "tokens" ratio 1,  N entries/page: latent cache of every layer + indexer keys of
//                the layers that run the indexer ("full" layers and MTP layers)
#pragma once
#include <vector>

#include "dsa/attention/plan.h"
#include "dsa/kv/cache_spec.h"
#include "dsa/model/config.h"

namespace dsa::model {

// Throws dsa::Error when a layer type has no backend (the plan's selection error) or the plan
// does not match the config.
std::vector<kv::CacheGroupSpec> kv_cache_groups(const ModelConfig& config, const std::vector<attn::LayerPlan>& plans);

}  // namespace dsa::model
