// TensorParallelSession: a Session (session.h) over a model split across `size` ranks
// (tp_models.h: an in-process group, one thread per rank). Every rank owns its own KV manager and
// model runner (the GLM latent cache is per token: each rank holds a full copy) and runs the same
// batch; the ranks' all-reduces keep their residual streams identical, so rank 0's logits are
// the step's. For tests and tools that look inside a step; serving runs through the Engine's
// tensor-parallel constructor (engine.h, tp_ranks.h).
// A rank that fails stops the others (the group aborts); the session is then unusable.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "dsa/engine/session.h"
#include "dsa/engine/tp_models.h"

namespace dsa::engine {

struct TpSessionOptions {
  SessionOptions session;
  parallel::InProcessOptions group;
  bool expert_parallel = false;  // TpLoadOptions::expert_parallel
};

class TensorParallelSession {
 public:
  TensorParallelSession(const std::string& dir, int size, Device device, const TpSessionOptions& opt = {});
  ~TensorParallelSession();
  int size() const { return models_.size(); }
  kv::RequestId add_request();  // on every rank (the same id everywhere)
  void free_request(kv::RequestId id);
  // As Session::forward, run by every rank; returns rank 0's logits.
  Tensor forward(const ForwardBatch& batch, bool all_logits = false);
  // Every rank's logits of the last forward (they must be identical: tests check it).
  const std::vector<Tensor>& rank_logits() const { return logits_; }
  model::CausalLM& model(int rank) { return models_.model(rank); }
  // Payload bytes rank `rank` has all-reduced so far.
  uint64_t collective_bytes(int rank) { return models_.collective_bytes(rank); }

 private:
  TensorParallelModels models_;
  std::vector<std::unique_ptr<Session>> sessions_;
  std::vector<Tensor> logits_;
};

}  // namespace dsa::engine
