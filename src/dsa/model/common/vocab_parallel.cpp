#include "dsa/model/common/vocab_parallel.h"

#include "dsa/core/error.h"
#include "dsa/ops/linear/linear.h"
#include "dsa/ops/tensor/tensor_ops.h"

namespace dsa::model {

Range vocab_shard(int64_t vocab, int rank, int size) {
  DSA_CHECK(size >= 1 && rank >= 0 && rank < size, "vocab_shard: rank {} of {}", rank, size);
  if (size == 1 || vocab % size != 0) return {0, vocab};
  return rank_range(vocab, rank, size, "vocab_size");
}

void lm_head_logits(const Tensor& hn, const Tensor& head, ShardGroup* shards, const Tensor& logits) {
  DSA_CHECK(hn.dim() == 2 && head.dim() == 2 && logits.dim() == 2 && hn.size(0) == logits.size(0) &&
                hn.size(1) == head.size(1),
            "lm_head_logits: hn {}, head {}, logits {} do not fit [R][K] x [V][K] -> [R][V]", hn.str(), head.str(),
            logits.str());
  const int64_t R = hn.size(0), V = logits.size(1), Vn = head.size(0);
  Tensor out = logits;
  if (Vn == V) {
    ops::linear_bf16(hn, head, out);
    return;
  }
  const int n = shards ? shards->size() : 1;
  DSA_CHECK(shards && Vn * n == V, "lm_head_logits: a head of {} rows for {} logits needs {} ranks, not {}", Vn, V,
            Vn > 0 ? V / Vn : 0, n);
  DSA_CHECK(logits.is_contiguous(), "lm_head_logits: logits {} must be contiguous", logits.str());
  const Device dev = hn.device();
  Tensor part = Tensor::empty({R, Vn}, DType::F32, dev);
  if (R > 0) ops::linear_bf16(hn, head, part);
  Tensor all = Tensor::empty({n * R, Vn}, DType::F32, dev);  // [rank][R][Vn]
  shards->all_gather(part, all);
  if (R == 0) return;
  // logits [R][rank][Vn] <- all [rank][R][Vn]: one strided copy.
  const Tensor by_row = Tensor::from_blob(all.raw(), {R, n, Vn}, DType::F32, dev, {Vn, R * Vn, 1});
  ops::copy_cast(logits.reshape({R, n, Vn}), by_row);
}

}  // namespace dsa::model
