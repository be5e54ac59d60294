// Cache groups: which paged byte pools a model needs and which of them share page accounting.
//
// A pool is the cache of one role (sliding-window KV, compressed KV, latent, indexer keys) of one
// layer: a byte buffer of whole pages. Pools whose entries are emitted by the same tokens and that
// hold the same number of entries per page fill and free in lockstep, so they form one group with
// one block table per request: page k of the group is page k of every pool in it. The groups of
// the supported models are listed in docs/kv-cache.md.
//
// An entry of a group of ratio m is written by the token at position pos with (pos + 1) % m == 0
// and has request-local index (pos + 1) / m - 1; its global slot is
// block_table[req][index / page_size] * page_size + index % page_size.
#pragma once
#include <cstddef>
#include <string>
#include <vector>

#include "dsa/attention/layer_spec.h"
#include "dsa/attention/plan.h"

// Declared only: model forwards include the KV manager, and its headers do not pull model/ back in.
namespace dsa::model {
struct ModelConfig;
}

namespace dsa::engine {

struct KvPoolSpec {
  int layer = 0;  // model layer: main layers 0..L-1, then MTP layers L..L+M-1
  attn::CacheRole role = attn::CacheRole::Latent;
  std::string layout;     // "fp8_model1", "fp8_ds_mla", "indexer_fp8", ... (attention plan)
  size_t page_bytes = 0;  // bytes of one page of this pool
};

struct CacheGroupSpec {
  std::string name;          // "swa", "c4", "c128", "tokens"
  int ratio = 1;             // tokens per entry
  int page_size = 0;         // entries per page
  int window = 0;            // > 0 (ratio 1 only): only the last `window` positions stay live
  int max_live_pages = 0;    // windowed groups: pages one request holds between steps, at most
  std::vector<KvPoolSpec> pools;

  size_t page_bytes() const;  // one page of the group: the sum over its pools
  void validate() const;      // throws dsa::Error naming the field and value
};

// Groups of a model from its attention plan (attn::plan_attention over config.attention_layers()).
// Throws dsa::Error when a layer type has no backend (the plan's selection error) or the plan
// does not match the config.
std::vector<CacheGroupSpec> kv_cache_groups(const model::ModelConfig& config, const std::vector<attn::LayerPlan>& plans);

// Pages a windowed group needs so that it never runs out while at most `max_requests` requests
// are registered and a step holds at most `max_step_tokens` tokens (derivation in the .cpp).
int64_t window_group_pages(const CacheGroupSpec& group, int max_requests, int64_t max_step_tokens);

}  // namespace dsa::engine
