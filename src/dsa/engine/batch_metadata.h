// BatchMetadata: what one step's model forward needs from the KV manager, built by
// KvManager::prepare(batch). All tensors are contiguous, on the KV manager's device. T = tokens
// of the batch, R = requests of the batch (row r = the batch's r-th segment, in flat order).
//
// Per batch:
//   token_ids    i32 [T]     input token ids (undefined when the batch carries none)
//   token_req    i32 [T]     row r of the token's request (the `token_req` of ops/sparse_index)
//   positions    i32 [T]     position of the token in its request
//   query_start  i32 [R + 1] tokens of request r are [query_start[r], query_start[r + 1])
//   cached_lens  i32 [R]     tokens of request r in the cache before this step (= its first position)
//   seq_lens     i32 [R]     tokens of request r in the cache after this step
// Per cache group g (same order as KvManager::groups(); pool.group indexes it):
//   block_table  i32 [R][max_blocks]  page of logical block b of request r, -1 where the request
//                holds no page (past its end, or freed behind the sliding window); max_blocks =
//                max over the batch of ceil(entries after the step / page_size), at least 1.
//                Exactly ops::BlockTable{block_table, page_size, num_pages} of ops/sparse_index.
//   slots        i64 [T]     global slot of the entry token t writes (kv_insert's `slots`), -1 when
//                it writes none (ratio m > 1: only tokens with (pos + 1) % m == 0 write one)
//   entry_tokens i32 [E]     compact form for compressors: the token index of each entry written
//   entry_slots  i64 [E]     ... and its slot (E = number of tokens with slot != -1)
// Slot of request-local entry index i (docs/kv-cache.md):
//   block_table[r][i / page_size] * page_size + i % page_size; entry i of ratio m is written by
//   position (i + 1) * m - 1. Slots are < num_pages * page_size <= 2^31 - 1.
#pragma once
#include <cstdint>
#include <vector>

#include "dsa/core/tensor.h"
#include "dsa/engine/batch.h"
#include "dsa/engine/request_state.h"

namespace dsa::engine {

struct GroupMetadata {
  int ratio = 1;
  int page_size = 0;
  int window = 0;
  int64_t num_pages = 0;
  Tensor block_table;
  Tensor slots;
  Tensor entry_tokens;
  Tensor entry_slots;
};

struct BatchMetadata {
  std::vector<RequestId> request_ids;  // [R]
  std::vector<RequestState*> states;   // [R] the requests' model states (nullptr until the model sets one)
  int64_t max_seq_len = 0;             // max of seq_lens, on the host (sizes index lists without a sync)
  Tensor token_ids;
  Tensor token_req;
  Tensor positions;
  Tensor query_start;
  Tensor cached_lens;
  Tensor seq_lens;
  std::vector<GroupMetadata> groups;

  int64_t num_tokens() const { return token_req.defined() ? token_req.size(0) : 0; }
  int num_requests() const { return static_cast<int>(request_ids.size()); }
  // Copy with every tensor on `dev` (states and ids are shared host data).
  BatchMetadata to(Device dev) const;
};

}  // namespace dsa::engine
