// TpRanks: how a tensor-parallel Engine (engine.h) runs a step on every rank (docs/parallelism.md).
//
// One scheduler and ONE KV bookkeeping: the engine's KvManager (rank 0's) decides pages, block
// tables and slots; every rank has its own pools of the same layout (the GLM latent cache is per
// token, so each rank holds the whole cache of its own forward) and runs the step from rank 0's
// metadata (ModelRunner::run_prepared). Ranks above 0 never see the scheduler or a request: they
// get a RankStep (the metadata and the rows) and their pools. Rank 0's sampled tokens are the
// step's; the others sample the same rows from the same bits (the all-reduces leave every rank's
// residual stream identical), which run() checks, so ranks that diverged are an error, never
// silent.
//
// In process the ranks are threads that read rank 0's RankStep. Ranks in other processes
// (TensorParallelModels' distributed form) receive it as bytes (rank_step.h) through two
// broadcasts per step (its length, then the bytes) before the same run_prepared, and an
// all-gather of the sampled ids checks they agree; the processes first agree on the KV layout
// (rank 0 sends its KvManagerOptions, each rank reports whether its pools came out the same), and
// the destructor tells them to stop (tp_follower.h: the other side).
// Not capturable as a CUDA graph: the in-process group stages its all-reduces through host
// memory, so the engine runs tensor-parallel steps eagerly.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "dsa/engine/kv_sizing.h"
#include "dsa/engine/model_runner.h"
#include "dsa/engine/rank_step.h"
#include "dsa/engine/tp_models.h"
#include "dsa/kv/kv_manager.h"

namespace dsa::engine {

// One rank's KV budget: each rank's from its own device (ranks that share a device split it,
// kv_sizing.h), the smallest over the ranks, since every rank's pools take the layout of the one
// bookkeeping.
KvBudget tp_kv_budget(TensorParallelModels& models, const KvMemoryOptions& o, int64_t max_step_tokens, int64_t hidden,
                      int64_t vocab);

class TpRanks {
 public:
  // kv / lead: rank 0's KV manager and runner (the engine's). ko: the options kv was made with;
  // every other rank gets pools of the same layout on its own device (checked equal).
  TpRanks(TensorParallelModels& models, kv::KvManager& kv, ModelRunner& lead, kv::KvManagerOptions ko,
          int64_t max_step_tokens, int max_running);
  ~TpRanks();

  int size() const { return models_.size(); }
  // Prepares the batch on the one bookkeeping, runs it on every rank, returns rank 0's result.
  // extras (speculative decoding, in-process ranks only): one StepExtras per rank, each with that
  // rank's hand-over buffers on its device; a draft step takes rank 0's KvManager::draft_metadata.
  StepResult run(const kv::Batch& batch, const std::vector<RowRequest>& rows,
                 const std::vector<StepExtras>* extras = nullptr);
  // A rejected draft's compressor-state rollback on every rank above 0 (rank 0's is the engine's
  // KvManager): snapshot / restore state slot `slot` of each follower's pools, on its stream.
  void save_state_slot(int slot);
  void restore_state_slot(int slot);
  ModelRunner& runner(int rank);
  Device device(int rank) const { return models_.device(rank); }
  uint64_t collective_bytes(int rank) { return models_.collective_bytes(rank); }

 private:
  void run_remote(const RankStep& step, StepResult& res);
  void on_followers(const std::function<void(kv::KvManager&)>& fn);  // ranks 1 .. size - 1, in process
  struct Follower {
    std::unique_ptr<kv::KvManager> pools;  // layout and pools only: no request is ever added
    std::unique_ptr<ModelRunner> runner;
  };
  TensorParallelModels& models_;
  kv::KvManager& kv_;
  ModelRunner& lead_;
  std::vector<Follower> followers_;  // ranks 1 .. size - 1
};

}  // namespace dsa::engine
