// BatchMetadata: what one step's model forward needs from the KV manager, built by
// KvManager::prepare(batch) as contiguous HOST tensors; the engine's model runner packs them into
// its pinned mirror and uploads them with one asynchronous copy (engine/model_runner.h), so the
// forward sees the same fields as device tensors. T = tokens of the batch, R = requests of the
// batch (row r = the batch's r-th segment, in flat order).
//
// Per batch:
//   token_ids    i32 [T]     input token ids (undefined when the batch carries none)
//   token_req    i32 [T]     row r of the token's request (the `token_req` of ops/sparse_index)
//   positions    i32 [T]     position of the token in its request
//   query_start  i32 [R + 1] tokens of request r are [query_start[r], query_start[r + 1])
//   cached_lens  i32 [R]     tokens of request r in the cache before this step (= its first position)
//   seq_lens     i32 [R]     tokens of request r in the cache after this step
//   index_len    (host)      the context length index lists are sized for: max_seq_len rounded up
//                to a bucket (index_len_bucket below); kernels read each token's own position, so
//                a longer list only holds more -1 entries
//   state_slots  i32 [R]     the request's slot in every state pool (kv/cache_spec.h)
// Per cache group g (same order as KvManager::groups(); pool.group indexes it):
//   block_table  i32 [R][max_blocks]  page of logical block b of request r, -1 where the request
//                holds no page (past its end, behind the sliding window, or beyond what it holds);
//                max_blocks = ceil((index_len / ratio) / page_size), at least 1 (so the width, like
//                index_len, changes only when a context crosses a bucket).
//                Exactly ops::BlockTable{block_table, page_size, num_pages} of ops/sparse_index.
//   slots        i64 [T]     global slot of the entry token t writes (kv_insert's `slots`), -1 when
//                it writes none (ratio m > 1: only tokens with (pos + 1) % m == 0 write one)
//   entry_tokens i32 [T]     form for compressors, one row per token of the batch: request r owns
//   entry_slots  i64 [T]     rows [entry_start[r], entry_start[r + 1]) = its token rows; its k-th
//   entry_start  i32 [R + 1] entry of the step (position order) is row entry_start[r] + k, holding
//                the token index that closes it and its slot; the rows after its entries hold -1
//                in both (nothing to write). So the shapes depend on T and R alone, never on how
//                many entries a step closes (what a CUDA graph of a decode step needs).
// Slot of request-local entry index i (docs/kv-cache.md):
//   block_table[r][i / page_size] * page_size + i % page_size; entry i of ratio m is written by
//   position (i + 1) * m - 1. Slots are < num_pages * page_size <= 2^31 - 1.
#pragma once
#include <cstdint>
#include <limits>
#include <vector>

#include "dsa/core/tensor.h"
#include "dsa/kv/batch.h"

namespace dsa::kv {

struct GroupMetadata {
  int ratio = 1;
  int page_size = 0;
  int window = 0;
  int64_t num_pages = 0;
  Tensor block_table;
  Tensor slots;
  Tensor entry_tokens;
  Tensor entry_slots;
  Tensor entry_start;
  int64_t entry_rows() const { return entry_tokens.defined() ? entry_tokens.size(0) : 0; }  // = T
};

// The bucket a context length falls in: n rounded up to a multiple of max(256, bit_floor(n) / 8)
// (at most max(255, n / 8) more than n: eight buckets per doubling above 2048), 0 for n <= 0.
int64_t index_len_bucket(int64_t n);

// Decode steps padded to a batch bucket (engine/model_runner.h): the smallest power of two >= n,
// capped at max_bucket (so the buckets are 1, 2, 4, ..., max_bucket); n itself above max_bucket
// (not padded) and 0 for n <= 0. Monotone in n.
int64_t decode_batch_bucket(int64_t n, int64_t max_bucket);

// The request id of a padding row (informational: nothing looks a padding row up).
inline constexpr RequestId kPaddingRequest = std::numeric_limits<RequestId>::min();

struct BatchMetadata {
  std::vector<RequestId> request_ids;  // [R] (host)
  int64_t max_seq_len = 0;             // max of seq_lens, on the host
  int64_t index_len = 0;               // index_len_bucket(max_seq_len): sizes index lists without a sync
  Tensor token_ids;
  Tensor token_req;
  Tensor positions;
  Tensor query_start;
  Tensor cached_lens;
  Tensor seq_lens;
  Tensor state_slots;
  std::vector<GroupMetadata> groups;

  int64_t num_tokens() const { return token_req.defined() ? token_req.size(0) : 0; }
  int num_requests() const { return static_cast<int>(request_ids.size()); }
  // Every tensor of the metadata, in a fixed order (the runner packs and re-points them).
  std::vector<Tensor*> tensors();
};

// Appends `rows` padding requests of one token each after the real ones (host tensors): token id
// 0 at position 0, cached and sequence length 0, state slot -1, block-table rows of -1, slots and
// entry rows -1. Every op skips such a row's cache and state writes, and no real row reads it, so
// the real rows' outputs do not change; max_seq_len and index_len stay those of the real rows.
void pad_metadata(BatchMetadata& m, int64_t rows);

}  // namespace dsa::kv
