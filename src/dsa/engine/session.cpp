#include "dsa/engine/session.h"

#include "dsa/core/error.h"

namespace dsa::engine {

Session::Session(model::CausalLM& lm, const SessionOptions& opt) : lm_(lm) {
  kv::KvManagerOptions ko;
  ko.device = lm_.device();
  ko.num_blocks = opt.kv_blocks;
  ko.max_requests = opt.max_requests;
  ko.max_step_tokens = opt.max_step_tokens;
  ko.max_position = lm_.config().max_position_embeddings;
  kv_ = std::make_unique<kv::KvManager>(lm_.kv_requirements(), ko);
  lm_.reserve(opt.max_step_tokens, opt.max_requests);
  runner_ = std::make_unique<ModelRunner>(lm_, *kv_);
}

kv::RequestId Session::add_request() {
  const kv::RequestId id = next_id_++;
  kv_->add_request(id);
  return id;
}

void Session::free_request(kv::RequestId id) { kv_->release(id); }

Tensor Session::forward(const ForwardBatch& f, bool all_logits) {
  const size_t T = f.token_ids.size();
  DSA_CHECK(T > 0 && f.request.size() == T && f.positions.size() == T,
            "session forward: token_ids ({}), request ({}) and positions ({}) must be non-empty and of one length", T,
            f.request.size(), f.positions.size());
  const int64_t V = lm_.config().vocab_size;
  kv::Batch b;
  b.request.assign(f.request.begin(), f.request.end());
  b.position = f.positions;
  b.token = f.token_ids;
  kv::BatchLimits lim = kv_->batch_limits();
  lim.vocab_size = static_cast<int>(V);
  const std::vector<kv::Batch::Segment> segs = b.segments(lim);
  std::vector<RowRequest> rows;
  if (all_logits) {
    for (size_t t = 0; t < T; ++t) rows.push_back({static_cast<int64_t>(t), {}, true});
  } else {
    for (const kv::Batch::Segment& s : segs) rows.push_back({s.first + s.count - 1, {}, true});
  }
  return runner_->run(b, rows).logits;
}

}  // namespace dsa::engine
