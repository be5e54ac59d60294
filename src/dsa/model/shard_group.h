// ShardGroup: the collectives a tensor-parallel model forward calls (docs/parallelism.md), and
// nothing more. The model layer declares it; the engine implements it over a
// parallel::Communicator (engine/communicator_shards.h), so the model never depends on how the
// ranks talk (in-process threads, NCCL) and parallel can sit above model.
#pragma once
#include "dsa/core/tensor.h"

namespace dsa::model {

class ShardGroup {
 public:
  virtual ~ShardGroup() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // In place: t = the sum of every rank's t. f32 or bf16, contiguous, the same shape on every
  // rank; every rank calls it at the same point of the forward.
  virtual void all_reduce_sum(const Tensor& t) = 0;
  // out [size * n][...] = every rank's in [n][...] concatenated along dim 0 in rank order
  // (contiguous, same dtype and shape on every rank): the vocabulary-parallel LM head's logits.
  virtual void all_gather(const Tensor& in, const Tensor& out) = 0;
};

}  // namespace dsa::model
