// The active tuning: the ops' run-time tactic chooser (ops/tactics/tactic_chooser.h) backed by
// a TuningTable. Start-up (model_warmup.h) fills a table from the cache and the tuner, then
// installs a TableTacticChooser over a copy of it; from then on every default-tactic call of
// the CUDA sparse-MLA backend and of the MoE layer runs the tactic tuned for its bucket.
//
// How a call finds its entry: the chooser holds the model's tunable op instances (never
// prepared: they only compute buckets, keys and tactic lists). A sparse-MLA call matches the
// instance with the same static shape (cache kind, heads, list widths, page sizes, sink); an
// expert GEMM call the instance with the same format, experts, top-k, N, K, SwiGLU and
// alignment. TuningTable::tactic_for then buckets the call's dims and returns the tuned tactic,
// or the default (with one warning per family) for an untuned bucket. A tuned sparse-MLA tactic
// that the op does not offer for the actual params (e.g. a large T drops split counts the
// bucket had) also falls back to the default. No match, no table: the default.
#pragma once
#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "dsa/ops/tactics/tactic_chooser.h"
#include "dsa/tune/moe_gemm_tunable.h"
#include "dsa/tune/sparse_mla_tunable.h"
#include "dsa/tune/tuning_table.h"
#include "dsa/tune/warmup_plan.h"

namespace dsa::tune {

class TableTacticChooser final : public ops::TacticChooser {
 public:
  // `ops`: the model's tunable ops (make_tunable_ops; ops of other families are ignored);
  // `table` is copied, so later changes to it do not reach this chooser. `where`: for describe().
  TableTacticChooser(std::vector<std::unique_ptr<TunableOp>> ops, const TuningTable& table, EngineLimits limits,
                     std::string where = "");
  std::string describe() const override;
  int sparse_mla(const ops::SparseMlaParams& p) const override;
  int expert_gemm(const ops::ExpertGemmShape& s) const override;

  size_t entries() const { return table_.size(); }
  // Calls whose tuned tactic the actual params do not offer (they ran the default).
  uint64_t not_offered() const { return not_offered_.load(std::memory_order_relaxed); }
  // Calls no op instance matched (they ran the default).
  uint64_t unmatched() const { return unmatched_.load(std::memory_order_relaxed); }

 private:
  std::vector<std::unique_ptr<TunableOp>> ops_;
  std::vector<const SparseMlaTunable*> mla_;
  std::vector<const MoeGemmTunable*> moe_;
  TuningTable table_;
  EngineLimits limits_;
  std::string where_;
  mutable std::atomic<uint64_t> not_offered_{0}, unmatched_{0};
};

// Copies every entry of `from` into `to` (as entries read from disk).
void copy_table(const TuningTable& from, TuningTable& to);

// Installs a TableTacticChooser over `table` for `ops` as the process-wide chooser (replacing
// any) and returns it. clear_active_tuning() goes back to the defaults.
std::shared_ptr<const TableTacticChooser> install_active_tuning(std::vector<std::unique_ptr<TunableOp>> ops,
                                                                const TuningTable& table, const EngineLimits& limits,
                                                                std::string where = "");
void clear_active_tuning();

}  // namespace dsa::tune
