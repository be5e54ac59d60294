// Reading the GLM golden files (scripts/golden/make_golden_glm5.py) and running dsa's forward on
// their prompts, shared by the golden tests.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "dsa/core/tensor.h"
#include "dsa/model/causal_lm.h"

namespace dsa::test {

struct Glm5Golden {
  std::vector<int32_t> prompt;
  Tensor prefill_logits;  // f32 [K][V]: last K prompt positions
  std::vector<int64_t> prefill_top1;
  std::vector<int32_t> decode_ids;
  Tensor decode_logits;   // f32 [N][V]: row i predicts decode_ids[i] (row 0 = last prefill row)
  std::string path;
};

// tests/data/golden/glm_moe_dsa/<name>.safetensors
std::string glm5_golden_path(const std::string& name);
Glm5Golden read_glm5_golden(const std::string& name);

// dsa's logits for a golden prompt: every prompt position (f32 [T][V]) and the decode rows 1..N-1,
// teacher-forced with transformers' greedy ids (row i predicts decode_ids[i]; f32 [N-1][V]).
struct Glm5Run {
  Tensor prefill;
  Tensor decode;
};
Glm5Run run_glm5_golden(model::CausalLM& lm, const Glm5Golden& g);

// Agreement of logits rows with transformers'.
struct Agreement {
  int rows = 0, top1_agree = 0;
  double max_diff = 0, sum_diff = 0;
  int64_t values = 0;
  std::vector<double> diffs;
  void add_row(const float* ours, const float* ref, int64_t V, int64_t ref_top1);  // also checks finiteness
  void add_top1(const float* ours, int64_t V, int64_t ref_top1);
  double mean() const { return values ? sum_diff / static_cast<double>(values) : 0.0; }
  double quantile(double q);
};

}  // namespace dsa::test
