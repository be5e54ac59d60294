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
// The cuts are taken from the checkpoint's tensors on the host while the weights are built
// (build_weights' Shard, weights.cpp), so a rank's device only ever holds its shard.
#pragma once
#include <cstdint>
#include <string>

#include "dsa/model/common/shard_slices.h"
#include "dsa/model/glm5/schema.h"
#include "dsa/model/glm5/weights.h"

namespace dsa::model::glm5 {

// The attention heads of each rank; throws naming the head count unless size divides it.
int64_t tp_local_heads(const schema::Glm5Dims& d, int size);

// The rank's slice of a SwiGLU intermediate size I (the same slice of gate, up and down).
// Throws dsa::Error naming `what` when size does not divide I or the slice is not a multiple of
// 128 (the down GEMM's K, and the FP8 scale blocks).
Range tp_inter_range(int64_t I, const Shard& tp, const std::string& what);

// The shard is cut while the weights are built (build_weights' `tp`): `ep` (expert parallelism)
// keeps the routed experts [r E/size, (r+1) E/size) whole (LayerWeights::expert_base; size must
// divide their count), else every expert keeps its tp_inter_range slice.

}  // namespace dsa::model::glm5
