// DeepSeek-V4 tensor parallelism (docs/parallelism.md): what rank r of `size` keeps.
//   split by heads:   wq_b rows and attn_sink of the rank's heads; wo_a rows of the rank's output
//                     groups (whole groups: a group mixes its heads); the attention itself
//   row-parallel:     wo_b, its input columns of the rank's groups -> partial sum, all-reduced
//   column-parallel:  w1 / w3 of every routed expert and of the shared expert (the rank's slice of
//                     the intermediate dim); w2 row-parallel over the same slice -> partial sum,
//                     all-reduced (one all-reduce for the whole MoE)
//   expert-parallel:  with --enable-expert-parallel the routed experts are split by expert instead
//                     (rank r keeps experts [r E/size, (r+1) E/size), whole); the shared expert
//                     stays column/row-parallel; the MoE's one all-reduce adds both
//   vocab-parallel:   head rows of the rank's share of the vocabulary, the logits all-gathered
//                     (model/common/vocab_parallel.h; replicated when size does not divide it)
//   replicated:       embedding, norms, mHC, wq_a / q_norm (q_res feeds every head and the
//                     indexer), wkv / kv_norm (one latent per token), the compressors, the indexer
//                     (its top-k must be the same on every rank), the router
// The cuts are taken from the checkpoint's tensors before they go to the device
// (weights.cpp), so a rank's device only ever holds its shard.
#pragma once
#include <cstdint>

#include "dsa/model/common/shard_slices.h"
#include "dsa/model/config.h"

namespace dsa::model::v4 {

// The split ranges of one rank; size 1 is the whole model (every range full).
struct TpShard {
  int rank = 0, size = 1;
  Range heads;     // of num_attention_heads
  Range groups;    // of o_groups
  Range inter;     // of moe_intermediate_size (the shared expert; the routed ones unless ep)
  Range experts;   // of n_routed_experts: the routed experts the rank keeps (all unless ep)
  Range vocab;     // of vocab_size: the LM head rows the rank keeps (all when size does not divide it)
  bool ep = false; // expert parallelism: routed experts split by `experts`, each whole
  bool split() const { return size > 1; }
};

// Throws dsa::Error naming the field and its value unless `size` ranks can shard `c`: size >= 1
// dividing num_attention_heads and o_groups, and leaving each rank a slice of
// moe_intermediate_size that is a multiple of 128 (the expert GEMMs' K: the down projection reads
// the slice). Reads only the config, so a command can refuse before any weight loads.
// With `ep` (expert parallelism) size must also divide n_routed_experts.
void check_tensor_parallel(const ModelConfig& c, int size, bool ep = false);

// The ranges of rank `rank` of `size` (checked as above).
TpShard tp_shard(const ModelConfig& c, int rank, int size, bool ep = false);

}  // namespace dsa::model::v4
