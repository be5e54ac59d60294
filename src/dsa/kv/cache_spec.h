// What memory a model asks the engine for, in the engine's terms: paged byte pools grouped by
// how they fill (cache groups) and per-request state slots. Models declare these specs
// (model/cache_specs.h builds them from a config and its attention plan); the KV manager
// (kv_manager.h) allocates and owns the memory. Nothing here knows a model.
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
//
// A state pool holds one fixed-size slot per registered request (DeepSeek-V4: the compressors'
// open windows): the request's slot index is in the step metadata (state_slots), so a batched op
// finds every request's state without a host loop.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "dsa/attention/layer_spec.h"

namespace dsa::kv {

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

// One slot per registered request of `slot_bytes` bytes (16-byte aligned), for layer `layer`.
struct StatePoolSpec {
  int layer = 0;
  std::string name;       // e.g. "compressor", "indexer_compressor"
  size_t slot_bytes = 0;
  void validate() const;
};

// Everything a model needs: what `CausalLM::kv_requirements` returns.
struct KvRequirements {
  std::vector<CacheGroupSpec> groups;
  std::vector<StatePoolSpec> states;
  int block_size = 0;  // tokens of context one page of every unbounded group covers
  // Bytes of KV memory one token of context costs (unbounded groups) and the fixed cost of one
  // request (window pages at their live maximum + state slots): for capacity logs.
  double bytes_per_token() const;
  size_t bytes_per_request() const;
  void validate() const;
};

// Pages a windowed group needs so that it never runs out while at most `max_requests` requests
// are registered and a step holds at most `max_step_tokens` tokens (derivation in the .cpp).
int64_t window_group_pages(const CacheGroupSpec& group, int max_requests, int64_t max_step_tokens);

}  // namespace dsa::kv
