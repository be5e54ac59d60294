// The indexer's scores and top-k for every token of a step, in row chunks so that the f32 score
// scratch is bounded by a fixed budget, not by tokens x context: a prefill chunk of 8192 tokens
// at 128K entries of context would need 4 GiB of scores in one piece; in chunks of
// budget / (N * 4) rows it needs the budget (at least one row: N * 4 bytes, 4 MiB at 1M entries).
// Each row's result depends only on its own query, keys and position, so the chunking does not
// change any value.
#pragma once
#include <cstdint>

#include "dsa/core/tensor.h"
#include "dsa/ops/indexer/indexer.h"

namespace dsa::model {

// Bytes of f32 indexer scores one step may hold at a time (the engine keeps them in its
// activation reserve).
constexpr int64_t kIndexerScoreBudget = int64_t{256} << 20;

// q: f32 [T][H][D]; weights: f32 [T][H]; positions: [T]; keys.token_req: i32 [T]; N: the most
// entries any token of the step sees; local: i32 [T][topk] (request-local entry ids, -1 padded).
// N == 0 writes -1 everywhere.
void paged_indexer_topk(const Tensor& q, const ops::PagedIndexerKeys& keys, const Tensor& weights,
                        const Tensor& positions, const ops::IndexerParams& p, int64_t N, const Tensor& local,
                        int64_t budget_bytes = kIndexerScoreBudget);

}  // namespace dsa::model
