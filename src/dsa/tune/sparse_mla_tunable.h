// The sparse MLA decode op (ops/sparse_mla) as a tunable op. A tactic is a heads-per-CTA x KV
// split count pair (e.g. "h32_s4"); -1 = the op's own heuristic default. The op numbers its
// tactics by position in a list that depends on the shape (T included: large T drops split
// counts whose workspace would be too big), so positions are not stable across a bucket. The
// tuner's ids are therefore stable codes, heads_per_cta * 100 + splits (h32_s4 = 3204), and
// sparse_mla_op_tactic() maps one to the op's position for the actual params at run time. One instance per attention layer type of a model: the static shape
// (cache kind, heads, list widths, page sizes, sink) is its instance key; the token count is
// the only dynamic dim, except for V4's HCA layers, whose compressed list grows with the
// context (dim "keys", bucketed to a few widths).
//
// Inputs for timing: paged caches of valid random FP8 bytes, `cache_bytes` each, and random
// index lists; when one call's unique KV bytes are below 2x the L2, run() rotates over several
// index sets so that timed calls do not find their keys in a warm L2 (docs/kernels.md "Benchmark method").
#pragma once
#include <memory>
#include <vector>

#include "dsa/ops/sparse_mla/sparse_mla.h"
#include "dsa/tune/plan_model.h"
#include "dsa/tune/tunable_op.h"
#include "dsa/tune/warmup_plan.h"

namespace dsa::tune {

struct SparseMlaTuneConfig {
  formats::KvFormat kind = formats::KvFormat::DsMla;
  int heads = 64;
  int main_keys = 2048;  // GLM: top-k; V4: the sliding window
  int main_page = 64;
  int extra_keys = 0;    // V4: compressed list (CSA: top-k); 0 = none
  int extra_page = 64;
  std::vector<int64_t> extra_key_buckets;  // V4 HCA: widths of the growing compressed list (dim "keys")
  bool sink = false;
  Device device = Device::cuda(0);
  size_t cache_bytes = size_t{256} << 20;  // per cache
  size_t l2_bytes = 0;                     // 0: from the device (CPU: 0, no rotation)
  void validate() const;
};

class SparseMlaTunable : public TunableOp {
 public:
  explicit SparseMlaTunable(SparseMlaTuneConfig c);
  std::string name() const override { return "sparse_mla_decode"; }
  std::string instance_key() const override;
  std::string signature() const override;
  std::vector<std::string> dim_names() const override;
  int64_t bucket_dim(size_t i, int64_t value) const override;
  std::vector<std::vector<int64_t>> other_dim_buckets() const override;
  std::vector<Tactic> tactics(const Dims& dims) const override;
  Device device() const override { return cfg_.device; }
  void prepare(const Dims& dims) override;
  void run(int tactic, const Dims& dims) override;
  void release() override;

  // The params of the last run (inputs and outputs on device()), for tests comparing against
  // the reference.
  const ops::SparseMlaParams& last_params() const { return sets_.at(last_set_); }
  const SparseMlaTuneConfig& config() const { return cfg_; }

 private:
  ops::SparseMlaParams shape_params(int64_t tokens, int64_t extra_keys) const;  // host metadata only
  int64_t extra_width(const Dims& dims) const;
  SparseMlaTuneConfig cfg_;
  ops::PagedKvCache main_cache_, extra_cache_;  // allocated on first prepare, kept
  std::vector<ops::SparseMlaParams> sets_;      // rotated input sets of the prepared bucket
  size_t next_set_ = 0, last_set_ = 0;
};

// Stable tuner id of an op tactic (heads_per_cta * 100 + splits).
int sparse_mla_tune_id(const ops::SparseMlaTactic& t);
// The op's tactic index for `p` of the tuned id (for ops::sparse_mla_decode(p, index)); -1 (the
// default) for -1 or an id that these params do not offer.
int sparse_mla_op_tactic(const ops::SparseMlaParams& p, int tune_id);

// One instance per attention layer type of `model` on CUDA device `device` (the registry's
// factory for the sparse_mla_decode family).
std::vector<std::unique_ptr<TunableOp>> make_sparse_mla_tunables(const PlanModel& model, const EngineLimits& limits,
                                                                 int device);

}  // namespace dsa::tune
