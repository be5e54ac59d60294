#include "dsa/engine/tp_session.h"

#include "dsa/core/error.h"
#include "dsa/parallel/rank_threads.h"

namespace dsa::engine {

TensorParallelSession::TensorParallelSession(const std::string& dir, int size, Device device,
                                             const TpSessionOptions& opt)
    : group_(size, opt.group), ranks_(static_cast<size_t>(size)), logits_(static_cast<size_t>(size)) {
  parallel::run_ranks(group_, [&](parallel::Communicator& c) {
    model::LoadModelOptions lo;
    lo.progress = false;
    Rank& r = ranks_[static_cast<size_t>(c.rank())];
    r.shards = std::make_unique<CommunicatorShards>(c);
    lo.shards = r.shards.get();
    r.lm = model::load_causal_lm(dir, device, lo);
    r.session = std::make_unique<Session>(*r.lm, opt.session);
  });
}

TensorParallelSession::~TensorParallelSession() = default;

int64_t TensorParallelSession::add_request() {
  int64_t id = -1;
  for (Rank& r : ranks_) {
    const int64_t got = r.session->add_request();
    DSA_CHECK(id < 0 || got == id, "tensor-parallel session: ranks gave request ids {} and {}", id, got);
    id = got;
  }
  return id;
}

void TensorParallelSession::free_request(int64_t id) {
  for (Rank& r : ranks_) r.session->free_request(id);
}

Tensor TensorParallelSession::forward(const ForwardBatch& batch, bool all_logits) {
  parallel::run_ranks(group_, [&](parallel::Communicator& c) {
    const size_t r = static_cast<size_t>(c.rank());
    logits_[r] = ranks_[r].session->forward(batch, all_logits);
  });
  return logits_[0];
}

model::CausalLM& TensorParallelSession::model(int rank) {
  DSA_CHECK(rank >= 0 && rank < size(), "tensor-parallel session: rank {} of {}", rank, size());
  return *ranks_[static_cast<size_t>(rank)].lm;
}

uint64_t TensorParallelSession::collective_bytes(int rank) { return group_.rank(rank).collective_bytes(); }

}  // namespace dsa::engine
