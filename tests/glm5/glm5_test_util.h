// The tiny GLM checkpoint shared by the glm5 tests: `dsa make-tiny --arch glm_moe_dsa --seed 1`
// (FP8), written once per test process into a temp dir (removed at exit).
#pragma once
#include <cstdint>
#include <string>

namespace dsa::test {
const std::string& glm5_tiny_dir();

// The same weights with config.json's index_topk = kGlm5DenseTopk (>= every golden prompt + its
// decode steps, so the indexer keeps every visible key) and num_experts_per_tok = n_routed_experts
// (every token uses every expert): no discrete choice is left in the forward. The checkpoint of the
// *_dense golden files (scripts/golden/make_golden_glm5.py, DENSE_TOPK).
constexpr int64_t kGlm5DenseTopk = 512;
const std::string& glm5_tiny_dense_dir();
}  // namespace dsa::test
