#include "dsa/engine/tp_session.h"

#include "dsa/core/error.h"

namespace dsa::engine {

TensorParallelSession::TensorParallelSession(const std::string& dir, int size, Device device,
                                             const TpSessionOptions& opt)
    : models_(dir, size, {device}, TpLoadOptions{opt.group, {}, opt.expert_parallel}), logits_(static_cast<size_t>(size)) {
  for (int r = 0; r < size; ++r) sessions_.push_back(std::make_unique<Session>(models_.model(r), opt.session));
}

TensorParallelSession::~TensorParallelSession() = default;

kv::RequestId TensorParallelSession::add_request() {
  kv::RequestId id = -1;
  for (auto& s : sessions_) {
    const kv::RequestId got = s->add_request();
    DSA_CHECK(id < 0 || got == id, "tensor-parallel session: ranks gave request ids {} and {}", id, got);
    id = got;
  }
  return id;
}

void TensorParallelSession::free_request(kv::RequestId id) {
  for (auto& s : sessions_) s->free_request(id);
}

Tensor TensorParallelSession::forward(const ForwardBatch& batch, bool all_logits) {
  models_.run([&](int r) { logits_[static_cast<size_t>(r)] = sessions_[static_cast<size_t>(r)]->forward(batch, all_logits); });
  return logits_[0];
}

}  // namespace dsa::engine
