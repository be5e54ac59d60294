// The run-time hook through which tuned tactics reach the ops. The tuner lives above the ops
// (src/dsa/tune), so the ops cannot ask it directly: instead the start-up code installs one
// process-wide TacticChooser (tune/active_tuning.h implements it over the TuningTable), and the
// call sites that run with "the default tactic" ask it for the actual params:
//   - attn::AttentionImpl::forward on CUDA tensors, for sparse_mla_decode;
//   - ops::moe_layer on CUDA tensors, for the routed-expert GEMMs (gate/up and down).
// Callers that pass an explicit tactic (the tuner, benchmarks, tests) never consult it, so the
// tuner's "default" timing stays the op's own heuristic.
//
// Whatever the chooser answers is checked against the params here (an index into
// sparse_mla_tactics(p); an expert GEMM tile the alignment allows): an invalid answer becomes
// the default with one warning, never a launch error. With no chooser installed every call
// gets the default (-1), which is the behaviour of a process that never tuned.
//
// Thread-safe: install/clear may race with lookups; a lookup sees either the old or the new
// chooser whole (shared_ptr under a mutex, with a lock-free "none installed" fast path).
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "dsa/ops/moe/expert_gemm.h"
#include "dsa/ops/sparse_mla/sparse_mla.h"

namespace dsa::ops {

// The static and dynamic shape of one routed-expert GEMM call of the MoE layer.
struct ExpertGemmShape {
  WeightFormat format = WeightFormat::MXFP4;
  int64_t experts = 0;
  int64_t topk = 0;
  int64_t n = 0;  // output width before SwiGLU
  int64_t k = 0;  // reduction width
  bool fuse_swiglu = false;
  int64_t alignment = 64;  // row alignment of the expert segments
  int64_t tokens = 0;      // tokens of the batch (the tuned dim)
};

class TacticChooser {
 public:
  virtual ~TacticChooser() = default;
  // One line for logs, e.g. "tuning table: 27 entries for cuda:0".
  virtual std::string describe() const = 0;
  // Index into sparse_mla_tactics(p) to run, or -1 for the op's default.
  virtual int sparse_mla(const SparseMlaParams& p) const = 0;
  // Expert GEMM tactic (ExpertGemmParams::tactic: 0..kExpertGemmTactics-1), or -1 for the op's default.
  virtual int expert_gemm(const ExpertGemmShape& s) const = 0;
};

// Installs `c` as the process-wide chooser (replacing any); nullptr clears it.
void install_tactic_chooser(std::shared_ptr<const TacticChooser> c);
void clear_tactic_chooser();
std::shared_ptr<const TacticChooser> active_tactic_chooser();
// Changes on every install / clear: a captured CUDA graph holds the tactics chosen when it was
// captured, so the model runner's graph keys include it (a tactic change recaptures).
uint64_t tactic_chooser_generation();

// The tactic a default-tactic call should run: the chooser's answer when one is installed and
// the answer is valid for these params, else -1. Records the choice (tactic_choice_stats).
int choose_sparse_mla_tactic(const SparseMlaParams& p);
int choose_expert_gemm_tactic(const ExpertGemmShape& s);

// What the hook chose, per family, for logs and tests. Counters are process-wide.
enum class TunedFamily { SparseMla = 0, ExpertGemm = 1 };
struct TacticChoiceStats {
  uint64_t calls = 0;     // choose_* calls while a chooser was installed
  uint64_t tuned = 0;     // ... that returned a non-default tactic
  uint64_t rejected = 0;  // ... where the chooser's answer was invalid for the params
  int last = -1;          // the last tactic returned (-1: default or no call yet)
};
TacticChoiceStats tactic_choice_stats(TunedFamily f);
void reset_tactic_choice_stats();

}  // namespace dsa::ops
