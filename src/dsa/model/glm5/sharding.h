// GLM-5.1 tensor parallelism (docs/parallelism.md): the shard of one rank of `size`.
//   split by heads:   q_b_proj rows, w_uk / w_uv (the absorbed kv_b_proj), the per-head attention
//   row-parallel:     o_proj (its input columns of the rank's heads) -> partial sum, all-reduced
//   column-parallel:  gate/up of the dense MLP, the shared expert and every routed expert (the
//                     rank's slice of each intermediate dim); down_proj row-parallel over the
//                     same slice -> partial sum, all-reduced (one all-reduce per MLP / MoE)
//   expert-parallel:  with --enable-expert-parallel the routed experts are split by expert instead
//                     (whole experts per rank); the shared expert stays column/row-parallel
//   vocab-parallel:   lm_head rows of the rank's share of the vocabulary, the logits all-gathered
//                     (model/common/vocab_parallel.h; replicated when size does not divide it)
//   replicated:       embedding, q_a / kv_a (the latent KV is per token, so every rank writes its
//                     own full copy of the latent cache), norms, indexer, router
#pragma once
#include <cstdint>

#include "dsa/model/glm5/weights.h"
#include "dsa/model/glm5/schema.h"

namespace dsa::model::glm5 {

// The attention heads of each rank; throws naming the head count unless size divides it.
int64_t tp_local_heads(const schema::Glm5Dims& d, int size);

// Replaces the split weights of `w` (the full model) by rank's shard; the replicated ones stay.
// Throws dsa::Error naming the weight when `size` does not divide a split dim, or when a rank's
// intermediate slice is not a multiple of 128 (the down GEMM's K, and the FP8 scale blocks).
// `ep` (expert parallelism): the routed experts are split by expert instead (the rank keeps
// experts [r E/size, (r+1) E/size) whole; LayerWeights::expert_base); size must divide their count.
void shard_weights(Weights& w, const schema::Glm5Dims& d, int rank, int size, bool ep = false);

}  // namespace dsa::model::glm5
