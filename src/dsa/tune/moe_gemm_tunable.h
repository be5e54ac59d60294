// The MoE grouped expert GEMM (ops/moe/expert_gemm.h) as a tunable op. Tactics are the op's
// kernel choices: 0 = 16-row tiles, 1 = 64-row tiles (prefill), 2 = 16-row tiles with a k split;
// for MXFP4/FP8 also the decode stream kernel's forms 3-8 (4 = with a k split) and the GEMV
// kernel's 9-10 (see ops/moe/expert_gemm.h); -1 = the op's heuristic. Two
// instances per MoE model: the fused gate/up projection (N = 2 x width, K = hidden, SwiGLU fused)
// and the down projection (N = hidden, K = width). Inputs: one layer's experts with random
// valid weights, random routings of T tokens over top-k distinct experts, laid out with the
// contiguous per-expert layout (alignment 64); when one call's used expert bytes fit in 2x the
// L2, run() rotates over several routings so that timed calls stream their weights.
#pragma once
#include <memory>
#include <vector>

#include "dsa/ops/moe/expert_gemm.h"
#include "dsa/ops/moe/layout.h"
#include "dsa/tune/plan_model.h"
#include "dsa/tune/tunable_op.h"
#include "dsa/tune/warmup_plan.h"

namespace dsa::tune {

struct MoeGemmTuneConfig {
  ops::WeightFormat format = ops::WeightFormat::MXFP4;
  int experts = 256;
  int topk = 6;
  int n = 4096;  // output width before SwiGLU (gate/up: 2 x moe width)
  int k = 4096;  // reduction width
  bool fuse_swiglu = true;
  int alignment = 64;
  Device device = Device::cuda(0);
  size_t l2_bytes = 0;  // 0: from the device (CPU: no rotation)
  void validate() const;
};

class MoeGemmTunable : public TunableOp {
 public:
  explicit MoeGemmTunable(MoeGemmTuneConfig c);
  std::string name() const override { return "moe_expert_gemm"; }
  std::string instance_key() const override;
  std::string signature() const override { return "expert_gemm:0=tile16,1=tile64,2=tile16_ksplit,3-8=stream,9-10=gemv;v3"; }
  std::vector<Tactic> tactics(const Dims& dims) const override;
  Device device() const override { return cfg_.device; }
  void prepare(const Dims& dims) override;
  void run(int tactic, const Dims& dims) override;
  void release() override;

  // Inputs and output of the last run, for tests comparing against the reference.
  struct Set {
    ops::MoeLayout layout;
    Tensor out;
  };
  const Set& last_set() const { return sets_.at(last_); }
  const Set& next_set() const { return sets_.at(next_); }  // the one the next run() uses
  const Tensor& activations() const { return a_; }
  const ops::ExpertWeights& weights() const { return w_; }
  const MoeGemmTuneConfig& config() const { return cfg_; }

 private:
  MoeGemmTuneConfig cfg_;
  ops::ExpertWeights w_;  // allocated by prepare, freed by release (GBs per layer)
  Tensor a_;
  std::vector<Set> sets_;
  int64_t tokens_ = 0;
  size_t next_ = 0, last_ = 0;
};

// The gate/up and down instances for `model` (experts MXFP4, FP8 or BF16; none otherwise).
std::vector<std::unique_ptr<TunableOp>> make_moe_gemm_tunables(const PlanModel& model, const EngineLimits& limits,
                                                               int device);

}  // namespace dsa::tune
