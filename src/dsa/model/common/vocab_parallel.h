// The vocabulary-parallel LM head of tensor parallelism (docs/parallelism.md): rank r of `size`
// keeps the head rows of its equal share of the vocabulary, computes those logits, and an
// all-gather assembles every rank's share in vocabulary order, so each rank reads 1/size of the
// largest single weight of the model (V4: 129280 x 4096 bf16, 1.06 GB; GLM-5.1: 154880 x 6144,
// 1.9 GB) instead of all of it. Where `size` does not divide the vocabulary the head stays whole
// on every rank (replicated) and no collective runs.
#pragma once
#include <cstdint>

#include "dsa/core/tensor.h"
#include "dsa/model/common/shard_slices.h"
#include "dsa/model/shard_group.h"

namespace dsa::model {

// The head rows rank `rank` of `size` keeps: [r V/size, (r + 1) V/size) when size divides
// vocab, else all of them.
Range vocab_shard(int64_t vocab, int rank, int size);

// logits [R][V] f32 = hn [R][K] bf16 times head^T. head is [V][K] (whole: one GEMM, shards
// ignored) or a rank's [V / size][K] share (shards required: its partial logits all-gathered from
// every rank and laid out in vocabulary order). Throws naming the shapes on anything else.
void lm_head_logits(const Tensor& hn, const Tensor& head, ShardGroup* shards, const Tensor& logits);

}  // namespace dsa::model
