// KvManager: owns all KV-like memory of a model in paged pools and per-request state slots, and
// maps request positions to global slots (vLLM's / nano-vllm's block manager is the model). The
// engine creates it from what the model declares (KvRequirements, kv/cache_spec.h) and sizes it;
// models only read the pools through the step metadata.
//
// Memory: one contiguous byte pool (Tensor u8 [num_pages * page_bytes]) per (layer, cache role),
// and one state pool (Tensor u8 [max_requests * slot_bytes]) per declared state, on the manager's
// device. Pools are grouped (cache_spec.h); a group has one free list and one block table per
// request. Pages are allocated on demand when a step needs them and freed when the request is
// released; in a windowed group (DeepSeek-V4 SWA) pages wholly behind the window are freed as the
// request advances. Pool bytes are not initialised: only slots a step wrote are ever addressed by
// the metadata, and state slots are initialised by the model's ops when a request starts
// (cached_lens == 0).
//
// Sizing: a page of any unbounded group holds `block_size` tokens of context (N tokens, or N/m
// entries of ratio m), so their page count is one number, `num_blocks`: given, or derived from a
// byte budget after the windowed groups and state slots took what `max_requests` and
// `max_step_tokens` need (window_group_pages: such a group never runs out within those limits).
//
// Step protocol (one stream, steps in order):
//   add_request(id)             registers a request (0 tokens cached) and gives it a state slot
//   prepare(batch) -> metadata  every segment must start where its request's cache ends; frees
//                               window pages no query can see any more (for all requests: the
//                               previous step's forward is ordered before this step's writes on
//                               the stream), allocates the pages the new tokens write, advances
//                               the requests' cached lengths, and returns the host tensors the
//                               forward needs (batch_metadata.h)
//   release(id)                 frees the request's pages and state slot (finished or preempted;
//                               a preempted request is re-added and prefilled again)
// Capacity: a scheduler asks fits(batch) / blocks_needed() first and preempts or waits instead;
// prepare throws KvOutOfMemory (a dsa::Error) and changes nothing when pages lack.
// Speculative decoding (docs/speculative-decoding.md) adds: reserve (pages ahead of the cached
// length, for the MTP layer's draft positions), truncate (a rejected draft's positions are
// forgotten; their pages stay held and are rewritten), draft_metadata (a batch over held pages
// that changes no cached length: the MTP layer's steps) and state snapshots (save_state /
// restore_state into a second slot per request, with options.state_backups).
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "dsa/core/error.h"
#include "dsa/core/tensor.h"
#include "dsa/kv/batch.h"
#include "dsa/kv/batch_metadata.h"
#include "dsa/kv/cache_spec.h"
#include "dsa/kv/page_allocator.h"

namespace dsa::kv {

struct KvManagerOptions {
  Device device = Device::cpu();
  // Size of the unbounded groups: exactly one of num_blocks (pages of each) or budget_bytes (all
  // pools together, windowed groups and state slots included) must be > 0.
  int64_t num_blocks = 0;
  size_t budget_bytes = 0;
  // Limits; 0 = none. Windowed groups are sized from max_requests and max_step_tokens (both then
  // required) unless window_pages > 0 gives their page count directly; state pools need
  // max_requests > 0 (one slot each).
  int max_requests = 0;         // requests registered at once
  int64_t max_step_tokens = 0;  // tokens of one batch
  int64_t window_pages = 0;
  int64_t max_position = 0;     // positions must be < max_position (model context length)
  bool state_backups = false;   // a second slot per request in every state pool (save_state)

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

// One state pool: slot s is bytes [s * slot_bytes, (s + 1) * slot_bytes) of data.
struct StatePool {
  StatePoolSpec spec;
  Tensor data;  // u8 [max_requests * slot_bytes]
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

// Pages in use per group (for metrics and logs).
struct KvUsage {
  std::string group;
  int64_t used_pages = 0;
  int64_t total_pages = 0;
  size_t page_bytes = 0;
};

class KvManager {
 public:
  KvManager(KvRequirements requirements, KvManagerOptions options);

  // ---- layout ----
  const std::vector<CacheGroupSpec>& groups() const { return req_.groups; }
  const KvRequirements& requirements() const { return req_; }
  const std::vector<KvPool>& pools() const { return pools_; }
  const KvPool* find_pool(int layer, attn::CacheRole role) const;  // nullptr when the layer has no such cache
  const KvPool& pool(int layer, attn::CacheRole role) const;       // throws naming layer and role
  const StatePool& state_pool(int layer, const std::string& name) const;  // throws naming layer and name
  int64_t num_pages(int group) const { return alloc_.at(group).num_pages(); }
  int64_t num_free_pages(int group) const { return alloc_.at(group).num_free(); }
  size_t total_bytes() const;
  const KvManagerOptions& options() const { return opt_; }
  Device device() const { return opt_.device; }
  BatchLimits batch_limits() const;
  std::string summary() const;  // one line per group: pools, pages, bytes
  std::vector<KvUsage> usage() const;

  // ---- capacity ----
  // Pages of group g that `len` tokens of context occupy (windowed groups: at most their live maximum).
  int64_t pages_for(int group, int64_t len) const;
  // Whether one request of `len` tokens fits the empty cache at all (the engine checks
  // max_model_len at start-up and every request at admission).
  bool fits_alone(int64_t len) const;
  // Context tokens the unbounded groups hold in all (the smallest over groups).
  int64_t capacity_tokens() const;
  // Whether a request that is not yet registered could take `len` tokens now (free pages, a free
  // state slot and max_requests).
  bool can_admit(int64_t len) const;

  // ---- requests ----
  void add_request(RequestId id);  // throws when already known or max_requests are registered
  void release(RequestId id);      // throws when unknown
  bool has_request(RequestId id) const { return requests_.count(id) != 0; }
  int num_requests() const { return static_cast<int>(requests_.size()); }
  int64_t num_cached(RequestId id) const;
  int state_slot(RequestId id) const;
  // Logical block -> page of the request in `group` (-1: freed behind the window).
  const std::vector<int32_t>& block_table(RequestId id, int group) const;
  int64_t pages_held(RequestId id, int group) const;

  // ---- steps ----
  KvDemand demand(const Batch& batch) const;  // validates the batch against limits and KV state
  bool can_prepare(const Batch& batch) const { return demand(batch).fits(); }
  BatchMetadata prepare(const Batch& batch);  // throws KvOutOfMemory (no change) when pages lack
  // Metadata of a step of `rows` padding rows only (pad_metadata, batch_metadata.h) sized for the
  // context bucket `index_len` (a value of index_len_bucket), with token ids: what a decode step
  // of `rows` requests at that bucket uploads, with nothing to read or write (start-up capture of
  // CUDA graphs, engine/model_runner.h). Changes nothing.
  BatchMetadata padding_metadata(int64_t rows, int64_t index_len) const;

  // ---- speculative decoding ----
  // Allocates the pages positions [0, len) of request `id` need in every group, without changing
  // its cached length. Returns false and changes nothing when the pages are not free.
  bool reserve(RequestId id, int64_t len);
  // The request's cache holds `len` <= num_cached(id) tokens from now on (a rejected draft's
  // positions are forgotten; pages stay held and are rewritten by the next tokens). Throws when
  // `len` is behind the sliding window's freed pages.
  void truncate(RequestId id, int64_t len);
  // Metadata (as prepare's) of a batch that writes only positions whose pages the request holds,
  // in any relation to its cached length, and changes nothing: the MTP layer's steps, whose cache
  // entries trail or lead the target's. Throws naming the token when a page is not held.
  BatchMetadata draft_metadata(const Batch& batch) const;
  // Copies the request's slot of every state pool into its backup slot (save) or back (restore),
  // on the current stream. Needs options.state_backups.
  void save_state(RequestId id);
  void restore_state(RequestId id);
  // The same by state slot (a request's: state_slot; every tensor-parallel rank's pools have
  // rank 0's layout, so a follower, which holds no requests, snapshots the slot rank 0 names).
  void save_state_slot(int slot);
  void restore_state_slot(int slot);

 private:
  struct Request {
    int64_t cached = 0;
    int slot = -1;
    std::vector<std::vector<int32_t>> blocks;  // [group][logical block] -> page, -1 = not held
    std::vector<int64_t> first_held;           // [group] first block still held (trimmed before)
  };
  Request& req(RequestId id);
  const Request& req(RequestId id) const;
  std::vector<Batch::Segment> check_batch(const Batch& batch) const;
  KvDemand demand_of(const std::vector<Batch::Segment>& segs) const;
  int64_t blocks_for(int group, int64_t len) const;       // blocks holding the entries of positions [0, len)
  int64_t first_live_block(int group, int64_t next) const;  // first block a query at `next` or later reads
  int64_t trim_end(int group, const Request& r) const;       // r's blocks below this are dead (windowed groups)
  BatchMetadata build_metadata(const Batch& batch, const std::vector<Batch::Segment>& segs) const;

  KvRequirements req_;
  KvManagerOptions opt_;
  std::vector<PageAllocator> alloc_;
  std::vector<KvPool> pools_;
  std::vector<StatePool> states_;
  std::vector<std::vector<int>> layer_pools_;  // [layer] -> indices into pools_
  std::vector<int> free_slots_;                // state slots not in use (back() handed out next)
  std::map<RequestId, Request> requests_;      // ordered: deterministic iteration
};

}  // namespace dsa::kv
