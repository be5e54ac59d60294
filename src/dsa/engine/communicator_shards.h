// The model layer's ShardGroup (model/shard_group.h) over a parallel::Communicator: what a
// tensor-parallel forward's all-reduces run through. Lives in engine, the lowest layer that sees
// both model and parallel.
#pragma once
#include "dsa/model/shard_group.h"
#include "dsa/parallel/communicator.h"

namespace dsa::engine {

class CommunicatorShards final : public model::ShardGroup {
 public:
  explicit CommunicatorShards(parallel::Communicator& c) : c_(c) {}
  int rank() const override { return c_.rank(); }
  int size() const override { return c_.size(); }
  void all_reduce_sum(const Tensor& t) override { c_.all_reduce_sum(t); }
  void all_gather(const Tensor& in, const Tensor& out) override { c_.all_gather(in, out); }
  parallel::Communicator& communicator() { return c_; }

 private:
  parallel::Communicator& c_;
};

}  // namespace dsa::engine
