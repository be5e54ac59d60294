#include "dsa/ops/tactics/tactic_chooser.h"

#include <atomic>
#include <mutex>

#include <fmt/format.h>

#include "dsa/core/log.h"

namespace dsa::ops {

namespace {

struct Slot {
  std::mutex mu;
  std::shared_ptr<const TacticChooser> chooser;
  std::atomic<bool> installed{false};  // lets calls without a chooser skip the mutex
  std::atomic<uint64_t> generation{0};
};
Slot& slot() {
  static Slot s;
  return s;
}

struct Counters {
  std::atomic<uint64_t> calls{0}, tuned{0}, rejected{0};
  std::atomic<int> last{-1};
};
Counters& counters(TunedFamily f) {
  static Counters c[2];
  return c[static_cast<int>(f)];
}

int record(TunedFamily f, int tactic, bool rejected) {
  Counters& c = counters(f);
  c.calls.fetch_add(1, std::memory_order_relaxed);
  if (tactic >= 0) c.tuned.fetch_add(1, std::memory_order_relaxed);
  if (rejected) c.rejected.fetch_add(1, std::memory_order_relaxed);
  c.last.store(tactic, std::memory_order_relaxed);
  return tactic;
}

}  // namespace

void install_tactic_chooser(std::shared_ptr<const TacticChooser> c) {
  Slot& s = slot();
  std::lock_guard lock(s.mu);
  if (c) log_debug("tactic chooser installed: {}", c->describe());
  s.installed.store(c != nullptr, std::memory_order_release);
  s.chooser = std::move(c);
  s.generation.fetch_add(1, std::memory_order_release);
}

uint64_t tactic_chooser_generation() { return slot().generation.load(std::memory_order_acquire); }

void clear_tactic_chooser() { install_tactic_chooser(nullptr); }

std::shared_ptr<const TacticChooser> active_tactic_chooser() {
  Slot& s = slot();
  if (!s.installed.load(std::memory_order_acquire)) return nullptr;
  std::lock_guard lock(s.mu);
  return s.chooser;
}

int choose_sparse_mla_tactic(const SparseMlaParams& p) {
  auto c = active_tactic_chooser();
  if (!c) return -1;
  const int t = c->sparse_mla(p);
  if (t == -1) return record(TunedFamily::SparseMla, -1, false);
  const auto n = static_cast<int>(sparse_mla_tactics(p).size());
  if (t < 0 || t >= n) {
    log_warn_once(fmt::format("tactic-chooser-sparse-mla:{}", t),
                  fmt::format("tactic chooser: sparse_mla tactic {} is not valid for T={} H={} ({} tactics); using "
                              "the default",
                              t, p.tokens(), p.heads(), n));
    return record(TunedFamily::SparseMla, -1, true);
  }
  return record(TunedFamily::SparseMla, t, false);
}

int choose_expert_gemm_tactic(const ExpertGemmShape& s) {
  auto c = active_tactic_chooser();
  if (!c) return -1;
  const int t = c->expert_gemm(s);
  if (t == -1) return record(TunedFamily::ExpertGemm, -1, false);
  // The same rules as validate_expert_gemm: tactics 0..kExpertGemmTactics-1, 64-row tiles only on 64-aligned segments.
  if (t < 0 || t >= kExpertGemmTactics || (t == 1 && s.alignment % 64 != 0)) {
    log_warn_once(fmt::format("tactic-chooser-expert-gemm:{}:{}", t, s.alignment),
                  fmt::format("tactic chooser: expert GEMM tactic {} is not valid with row alignment {}; using the "
                              "default",
                              t, s.alignment));
    return record(TunedFamily::ExpertGemm, -1, true);
  }
  return record(TunedFamily::ExpertGemm, t, false);
}

TacticChoiceStats tactic_choice_stats(TunedFamily f) {
  const Counters& c = counters(f);
  TacticChoiceStats s;
  s.calls = c.calls.load(std::memory_order_relaxed);
  s.tuned = c.tuned.load(std::memory_order_relaxed);
  s.rejected = c.rejected.load(std::memory_order_relaxed);
  s.last = c.last.load(std::memory_order_relaxed);
  return s;
}

void reset_tactic_choice_stats() {
  for (auto f : {TunedFamily::SparseMla, TunedFamily::ExpertGemm}) {
    Counters& c = counters(f);
    c.calls = 0;
    c.tuned = 0;
    c.rejected = 0;
    c.last = -1;
  }
}

}  // namespace dsa::ops
