// TensorParallelSession: a Session (session.h) over a model split across `size` ranks of an
// in-process group (parallel/in_process_group.h), one thread per rank. Every rank loads its shard
// of the checkpoint (docs/parallelism.md), owns its own KV manager and model runner (the GLM
// latent cache is per token: each rank holds a full copy) and runs the same batch; the ranks'
// all-reduces keep their residual streams identical, so rank 0's logits are the step's.
// The first step of tensor parallelism: engine/CLI integration (--tensor-parallel-size) is next.
// A rank that fails stops the others (the group aborts); the session is then unusable.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "dsa/engine/communicator_shards.h"
#include "dsa/engine/session.h"
#include "dsa/model/causal_lm.h"
#include "dsa/parallel/in_process_group.h"

namespace dsa::engine {

struct TpSessionOptions {
  SessionOptions session;
  parallel::InProcessOptions group;
};

class TensorParallelSession {
 public:
  TensorParallelSession(const std::string& dir, int size, Device device, const TpSessionOptions& opt = {});
  ~TensorParallelSession();
  int size() const { return static_cast<int>(ranks_.size()); }
  int64_t add_request();  // on every rank (the same id everywhere)
  void free_request(int64_t id);
  // As Session::forward, run by every rank; returns rank 0's logits.
  Tensor forward(const ForwardBatch& batch, bool all_logits = false);
  // Every rank's logits of the last forward (they must be identical: tests check it).
  const std::vector<Tensor>& rank_logits() const { return logits_; }
  model::CausalLM& model(int rank);
  // Payload bytes rank `rank` has all-reduced so far.
  uint64_t collective_bytes(int rank);

 private:
  struct Rank {
    std::unique_ptr<CommunicatorShards> shards;
    std::unique_ptr<model::CausalLM> lm;
    std::unique_ptr<Session> session;
  };
  parallel::InProcessGroup group_;
  std::vector<Rank> ranks_;
  std::vector<Tensor> logits_;
};

}  // namespace dsa::engine
