// Session: one model with KV memory of its own, driven batch by batch through the model runner,
// without the scheduler: for tests that compare forwards (golden logits, chunking, batched vs
// solo), for benchmarks and tools that need the logits themselves. The engine is the way to
// serve requests; a session is the way to look inside one step.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "dsa/core/tensor.h"
#include "dsa/engine/model_runner.h"
#include "dsa/kv/kv_manager.h"
#include "dsa/model/causal_lm.h"

namespace dsa::engine {

struct ForwardBatch {
  std::vector<int32_t> token_ids;  // [N]
  std::vector<kv::RequestId> request;  // [N] request id (from add_request)
  std::vector<int64_t> positions;  // [N] position within the request (consecutive per request)

  // The tokens of one request at positions start, start + 1, ...
  static ForwardBatch of(kv::RequestId request, const std::vector<int32_t>& tokens, int64_t start = 0) {
    ForwardBatch b;
    b.token_ids = tokens;
    b.request.assign(tokens.size(), request);
    for (size_t i = 0; i < tokens.size(); ++i) b.positions.push_back(start + static_cast<int64_t>(i));
    return b;
  }
};

struct SessionOptions {
  int max_requests = 8;
  int64_t max_step_tokens = 4096;
  int64_t kv_blocks = 64;  // pages per unbounded cache group
};

class Session {
 public:
  explicit Session(model::CausalLM& lm, const SessionOptions& opt = {});
  kv::RequestId add_request();
  void free_request(kv::RequestId id);
  // Runs the batch and returns f32 logits on the host: [N][vocab] when all_logits, otherwise one
  // row per request of the batch (its last token), in order of first appearance.
  Tensor forward(const ForwardBatch& batch, bool all_logits = false);
  kv::KvManager& kv() { return *kv_; }
  ModelRunner& runner() { return *runner_; }
  model::CausalLM& model() { return lm_; }

 private:
  model::CausalLM& lm_;
  std::unique_ptr<kv::KvManager> kv_;
  std::unique_ptr<ModelRunner> runner_;
  kv::RequestId next_id_ = 0;
};

}  // namespace dsa::engine
