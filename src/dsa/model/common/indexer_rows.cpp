#include "dsa/model/common/indexer_rows.h"

#include <algorithm>

#include "dsa/core/error.h"

namespace dsa::model {

void paged_indexer_topk(const Tensor& q, const ops::PagedIndexerKeys& keys, const Tensor& weights,
                        const Tensor& positions, const ops::IndexerParams& p, int64_t N, const Tensor& local,
                        int64_t budget_bytes) {
  const int64_t T = q.size(0);
  DSA_CHECK(local.dim() == 2 && local.size(0) == T, "indexer: local indices {} for {} tokens", local.str(), T);
  if (T == 0) return;
  if (N == 0) {
    Tensor l = local;
    l.fill_bytes(0xFF);  // -1: no entry yet
    return;
  }
  const int64_t rows = std::clamp<int64_t>(budget_bytes / (N * 4), 1, T);
  // One scratch for all chunks (the step arena hands out memory per allocation, not per chunk).
  const Tensor scores = Tensor::empty({rows, N}, DType::F32, q.device());
  for (int64_t r0 = 0; r0 < T; r0 += rows) {
    const int64_t r1 = std::min(T, r0 + rows);
    ops::PagedIndexerKeys k = keys;
    k.token_req = keys.token_req.slice(0, r0, r1);
    const Tensor s = scores.slice(0, 0, r1 - r0);
    const Tensor pos = positions.slice(0, r0, r1);
    ops::indexer_scores_paged(q.slice(0, r0, r1), k, weights.slice(0, r0, r1), pos, p, s);
    ops::topk_select(s, pos, p, local.slice(0, r0, r1));
  }
}

}  // namespace dsa::model
