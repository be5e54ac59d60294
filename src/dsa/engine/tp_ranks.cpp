#include "dsa/engine/tp_ranks.h"

#include <fmt/format.h>

#include "dsa/core/error.h"
#include "dsa/core/cuda_stream.h"
#include "dsa/core/log.h"
#include "dsa/engine/tp_wire.h"

namespace dsa::engine {

KvBudget tp_kv_budget(TensorParallelModels& models, const KvMemoryOptions& o, int64_t max_step_tokens, int64_t hidden,
                      int64_t vocab) {
  if (models.distributed()) {  // every process sizes from its own device; rank 0's options then rule
    KvBudget b = kv_budget(models.device(models.first_local_rank()), o, max_step_tokens, hidden, vocab, 1);
    b.how = fmt::format("rank 0 of {} processes: {}", models.size(), b.how);
    return b;
  }
  KvBudget best;
  for (int r = 0; r < models.size(); ++r) {
    int sharing = 0;
    for (int q = 0; q < models.size(); ++q) sharing += models.device(q) == models.device(r);
    const KvBudget b = kv_budget(models.device(r), o, max_step_tokens, hidden, vocab, sharing);
    if (r == 0 || b.bytes < best.bytes) best = b;
  }
  if (models.size() > 1) best.how = fmt::format("per rank, {} ranks: {}", models.size(), best.how);
  return best;
}

TpRanks::TpRanks(TensorParallelModels& models, kv::KvManager& kv, ModelRunner& lead, kv::KvManagerOptions ko,
                 int64_t max_step_tokens, int max_running)
    : models_(models), kv_(kv), lead_(lead) {
  if (models_.distributed()) {
    DSA_CHECK(models_.first_local_rank() == 0, "tensor parallel: the engine runs on rank 0, this process is rank {}",
              models_.first_local_rank());
    lead.set_graphs(false);
    parallel::Communicator& c = models_.communicator(0);
    TpSetup setup{ko, max_step_tokens, max_running, kv_layout(kv_)};
    std::string bytes = encode_tp_setup(setup);
    send_command(c, TpCommand::Setup, &bytes);
    const std::vector<int32_t> ok = gather_status(c, 0);
    for (int r = 1; r < models_.size(); ++r)
      DSA_CHECK(ok[static_cast<size_t>(r)] == 0,
                "tensor parallel: rank {} could not set up KV pools of rank 0's layout (its log says why)", r);
    return;
  }
  for (int r = 1; r < models_.size(); ++r) {
    model::CausalLM& lm = models_.model(r);
    ko.device = lm.device();
    Follower f;
    f.pools = std::make_unique<kv::KvManager>(lm.kv_requirements(), ko);
    // The ranks read rank 0's slots and block tables: their pools must match page for page.
    const auto& a = kv_.pools();
    const auto& b = f.pools->pools();
    DSA_CHECK(a.size() == b.size(), "tensor parallel: rank {} declares {} KV pools, rank 0 {}", r, b.size(), a.size());
    for (size_t i = 0; i < a.size(); ++i)
      DSA_CHECK(a[i].layer == b[i].layer && a[i].role == b[i].role && a[i].page_bytes == b[i].page_bytes &&
                    a[i].num_pages == b[i].num_pages && a[i].page_size == b[i].page_size,
                "tensor parallel: rank {}'s KV pool {} (layer {}, {} pages of {} bytes) differs from rank 0's (layer "
                "{}, {} pages of {} bytes)",
                r, i, b[i].layer, b[i].num_pages, b[i].page_bytes, a[i].layer, a[i].num_pages, a[i].page_bytes);
    lm.reserve(max_step_tokens, max_running);
    f.runner = std::make_unique<ModelRunner>(lm, *f.pools);
    f.runner->set_graphs(false);
    followers_.push_back(std::move(f));
  }
  lead_.set_graphs(false);
}

TpRanks::~TpRanks() {
  if (!models_.distributed()) return;
  try {  // the other processes leave their loop; a group that already stopped has nobody to tell
    send_command(models_.communicator(0), TpCommand::Stop, nullptr);
  } catch (const std::exception& e) {
    log_warn("tensor parallel: could not tell the other ranks to stop: {}", e.what());
  }
}

ModelRunner& TpRanks::runner(int rank) {
  DSA_CHECK(rank >= 0 && rank < size(), "tensor parallel: rank {} of {}", rank, size());
  return rank == 0 ? lead_ : *followers_[static_cast<size_t>(rank - 1)].runner;
}

StepResult TpRanks::run(const kv::Batch& batch, const std::vector<RowRequest>& rows,
                        const std::vector<StepExtras>* extras) {
  DSA_CHECK(!rows.empty(), "tensor parallel: a step must sample at least one row");
  for (const RowRequest& r : rows)  // before prepare: a refused step changes no KV state
    DSA_CHECK(r.token >= 0 && r.token < batch.num_tokens(), "tensor parallel: row token {} outside the batch of {}",
              r.token, batch.num_tokens());
  DSA_CHECK(extras == nullptr || static_cast<int>(extras->size()) == size(),
            "tensor parallel: {} step extras for {} ranks", extras ? extras->size() : 0, size());
  DSA_CHECK(extras == nullptr || !models_.distributed(),
            "tensor parallel: speculative decoding runs with the ranks of one process only");
  const bool draft = extras != nullptr && (*extras)[0].draft;
  const RankStep step{draft ? kv_.draft_metadata(batch) : kv_.prepare(batch), rows};
  if (models_.distributed()) {
    StepResult res;
    run_remote(step, res);
    return res;
  }
  std::vector<StepResult> res(static_cast<size_t>(size()));
  models_.run([&](int r) {
    const StepExtras* x = extras ? &(*extras)[static_cast<size_t>(r)] : nullptr;
    res[static_cast<size_t>(r)] = runner(r).run_prepared(step.meta, step.rows, x);
  });
  for (int r = 1; r < size(); ++r) {
    const std::vector<int32_t>& got = res[static_cast<size_t>(r)].tokens;
    for (size_t i = 0; i < got.size(); ++i)
      DSA_CHECK(got[i] == res[0].tokens[i],
                "tensor parallel: rank {} sampled token {} for row {} where rank 0 sampled {}: the ranks' forwards "
                "diverged (their residual streams must stay bit-identical)",
                r, got[i], i, res[0].tokens[i]);
  }
  return std::move(res[0]);
}

// On each follower's own thread (which holds its CUDA device) and stream, in the step order.
void TpRanks::on_followers(const std::function<void(kv::KvManager&)>& fn) {
  DSA_CHECK(!models_.distributed(), "tensor parallel: state snapshots run with the ranks of one process only");
  models_.run([&](int r) {
    if (r == 0) return;
    Follower& f = followers_[static_cast<size_t>(r - 1)];
    cuda_stream::StreamScope on_stream(f.runner->stream());
    fn(*f.pools);
  });
}

void TpRanks::save_state_slot(int slot) {
  on_followers([&](kv::KvManager& kv) { kv.save_state_slot(slot); });
}

void TpRanks::restore_state_slot(int slot) {
  on_followers([&](kv::KvManager& kv) { kv.restore_state_slot(slot); });
}

void TpRanks::run_remote(const RankStep& step, StepResult& res) {
  parallel::Communicator& c = models_.communicator(0);
  std::string bytes = encode_rank_step(step);
  send_command(c, TpCommand::Step, &bytes);
  res = lead_.run_prepared(step.meta, step.rows);
  const std::vector<std::vector<int32_t>> all = gather_tokens(c, res.tokens);
  for (int r = 1; r < size(); ++r)
    for (size_t i = 0; i < res.tokens.size(); ++i)
      DSA_CHECK(all[static_cast<size_t>(r)][i] == res.tokens[i],
                "tensor parallel: rank {} sampled token {} for row {} where rank 0 sampled {}: the ranks' forwards "
                "diverged (their residual streams must stay bit-identical)",
                r, all[static_cast<size_t>(r)][i], i, res.tokens[i]);
}

}  // namespace dsa::engine
