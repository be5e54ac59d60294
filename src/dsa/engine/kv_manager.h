// KvManager: owns all KV-like memory of a model in paged pools and maps request positions to
// global slots (vLLM's / nano-vllm's block manager is the model; docs/kv-cache.md).
//
// Memory: one contiguous byte pool (Tensor u8 [num_pages * page_bytes]) per (layer, cache role),
// on the manager's device. Pools are grouped (cache_groups.h); a group has one free list and one
// block table per request. Pages are allocated on demand when a step needs them and freed when
// the request is released; in a windowed group (DeepSeek-V4 SWA) pages wholly behind the window
// are freed as the request advances. Pool bytes are not initialised: only slots a step wrote are
// ever addressed by the metadata.
//
// Sizing: a page of any unbounded group holds `block_size` tokens of context (N tokens, or N/m
// entries of ratio m), so their page count is one number, `num_blocks`: given, or derived from a
// byte budget after the windowed groups took what `max_requests` and `max_step_tokens` need
// (window_group_pages: such a group never runs out within those limits).
//
// Step protocol (one stream, steps in order):
//   add_request(id)             registers a request (0 tokens cached; model state from the factory)
//   prepare(batch) -> metadata  every segment must start where its request's cache ends; frees
//                               window pages no query can see any more (for all requests: the
//                               previous step's forward is ordered before this step's writes on
//                               the stream), allocates the pages the new tokens write, advances
//                               the requests' cached lengths, and returns the tensors the forward
//                               needs (batch_metadata.h)
//   release(id)                 frees the request's pages and model state (finished or preempted;
//                               a preempted request is re-added and prefilled again)
// Out of memory: prepare throws KvOutOfMemory (a dsa::Error) and changes nothing; a scheduler
// asks can_prepare() / demand() first and preempts or waits instead.
// Positions only advance (no rollback of speculative tokens yet).
//
// In a model forward (one layer; `meta` = prepare's result, ops from formats/ and ops/sparse_index):
//   const KvPool& swa = kv.pool(layer, attn::CacheRole::SlidingWindow);
//   const GroupMetadata& g = meta.groups[swa.group];
//   kv_insert({.format = Model1, .page_size = swa.page_size, .cache = swa.data, .kv = rows /*[T][512]*/,
//              .slots = g.slots});
//   swa_window_slots({.positions = meta.positions, .token_req = meta.token_req,
//                     .blocks = {g.block_table, g.page_size, g.num_pages}, .slots = idx /*[T][128]*/});
//   compressed caches: the compressor's rows for the tokens meta.groups[c.group].entry_tokens go to
//   kv_insert with .slots = entry_slots; hca_visible_slots / topk_to_global_slots read its block table.
//   Per-request compressor state: meta.states[r] (RequestState, created by options.make_state).
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "dsa/core/error.h"
#include "dsa/core/tensor.h"
#include "dsa/engine/batch.h"
#include "dsa/engine/batch_metadata.h"
#include "dsa/engine/cache_groups.h"
#include "dsa/engine/page_allocator.h"
#include "dsa/engine/request_state.h"

namespace dsa::engine {

struct KvManagerOptions {
  Device device = Device::cpu();
  // Size of the unbounded groups: exactly one of num_blocks (pages of each) or budget_bytes (all
  // pools together, windowed groups included) must be > 0.
  int64_t num_blocks = 0;
  size_t budget_bytes = 0;
  // Limits; 0 = none. Windowed groups are sized from max_requests and max_step_tokens (both then
  // required) unless window_pages > 0 gives their page count directly.
  int max_requests = 0;         // requests registered at once
  int64_t max_step_tokens = 0;  // tokens of one batch
  int64_t window_pages = 0;
  int64_t max_position = 0;     // positions must be < max_position (model context length)
  // Creates the model's state for each new request (optional; see request_state.h).
  std::function<std::unique_ptr<RequestState>()> make_state;

  void validate() const;  // throws dsa::Error naming the field and value
};

// One byte pool: the cache of one role of one layer.
struct KvPool {
  int layer = 0;
  attn::CacheRole role = attn::CacheRole::Latent;
  std::string layout;
  int group = 0;        // index into KvManager::groups() and BatchMetadata::groups
  int page_size = 0;    // entries per page
  size_t page_bytes = 0;
  int64_t num_pages = 0;
  Tensor data;          // u8 [num_pages * page_bytes], contiguous (kv_insert's / sparse_mla's `cache`)
};

class KvOutOfMemory : public Error {
 public:
  using Error::Error;
};

// Pages a batch needs per group against what it can have.
struct KvDemand {
  std::vector<int64_t> needed;     // new pages the step allocates
  std::vector<int64_t> available;  // free pages + pages the step frees behind the window
  bool fits() const;
};

class KvManager {
 public:
  KvManager(std::vector<CacheGroupSpec> groups, KvManagerOptions options);
  // Groups from the model's attention plan (kv_cache_groups).
  static KvManager for_model(const model::ModelConfig& config, const std::vector<attn::LayerPlan>& plans,
                             KvManagerOptions options);

  // ---- layout ----
  const std::vector<CacheGroupSpec>& groups() const { return groups_; }
  const std::vector<KvPool>& pools() const { return pools_; }
  const KvPool* find_pool(int layer, attn::CacheRole role) const;  // nullptr when the layer has no such cache
  const KvPool& pool(int layer, attn::CacheRole role) const;       // throws naming layer and role
  int64_t num_pages(int group) const { return alloc_.at(group).num_pages(); }
  int64_t num_free_pages(int group) const { return alloc_.at(group).num_free(); }
  size_t total_bytes() const;
  const KvManagerOptions& options() const { return opt_; }
  BatchLimits batch_limits() const;
  std::string summary() const;  // one line per group: pools, pages, bytes

  // ---- requests ----
  void add_request(RequestId id);  // throws when already known or max_requests are registered
  void release(RequestId id);      // throws when unknown
  bool has_request(RequestId id) const { return requests_.count(id) != 0; }
  int num_requests() const { return static_cast<int>(requests_.size()); }
  int64_t num_cached(RequestId id) const;
  RequestState* state(RequestId id) const;  // nullptr when none
  void set_state(RequestId id, std::unique_ptr<RequestState> state);
  // Logical block -> page of the request in `group` (-1: freed behind the window).
  const std::vector<int32_t>& block_table(RequestId id, int group) const;
  int64_t pages_held(RequestId id, int group) const;

  // ---- steps ----
  KvDemand demand(const Batch& batch) const;  // validates the batch against limits and KV state
  bool can_prepare(const Batch& batch) const { return demand(batch).fits(); }
  BatchMetadata prepare(const Batch& batch);  // throws KvOutOfMemory (no change) when pages lack

 private:
  struct Request {
    int64_t cached = 0;
    std::vector<std::vector<int32_t>> blocks;  // [group][logical block] -> page, -1 = not held
    std::vector<int64_t> first_held;           // [group] first block still held (trimmed before)
    std::unique_ptr<RequestState> state;
  };
  Request& req(RequestId id);
  const Request& req(RequestId id) const;
  std::vector<Batch::Segment> check_batch(const Batch& batch) const;
  KvDemand demand_of(const std::vector<Batch::Segment>& segs) const;
  int64_t blocks_for(int group, int64_t len) const;       // blocks holding the entries of positions [0, len)
  int64_t first_live_block(int group, int64_t next) const;  // first block a query at `next` or later reads
  int64_t trim_end(int group, const Request& r) const;       // r's blocks below this are dead (windowed groups)
  BatchMetadata build_metadata(const Batch& batch, const std::vector<Batch::Segment>& segs) const;

  std::vector<CacheGroupSpec> groups_;
  KvManagerOptions opt_;
  std::vector<PageAllocator> alloc_;
  std::vector<KvPool> pools_;
  std::vector<std::vector<int>> layer_pools_;  // [layer] -> indices into pools_
  std::map<RequestId, Request> requests_;      // ordered: deterministic iteration
};

}  // namespace dsa::engine
