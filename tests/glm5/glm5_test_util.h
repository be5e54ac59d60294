// The tiny GLM checkpoints shared by the glm5 tests, written once per test process into temp
// dirs (removed at exit):
//  - glm5_tiny_dir(): `dsa make-tiny --arch glm_moe_dsa --seed 1` (FP8, what the golden files
//    were made from);
//  - glm5_tiny_dense_dir(): the same weights with config.json's index_topk = kGlm5DenseTopk
//    (>= every golden prompt + its decode steps, so the indexer keeps every visible key) and
//    num_experts_per_tok = n_routed_experts (every token uses every expert): no discrete choice
//    is left in the forward. The checkpoint of the *_dense golden files
//    (scripts/golden/make_golden_glm5.py, DENSE_TOPK);
//  - glm5_tiny_bf16_dir(): the BF16 twin of glm5_tiny_dir (`--dtype bf16 --seed 1`: the FP8
//    weights dequantized and rounded to bf16);
//  - glm5_tiny_transformers_dir(): `--bf16 --seed 1 --variant transformers` (the bf16 router bias
//    save_pretrained writes; the *_transformers golden files, scripts/gpu/make_variant_goldens.sh);
//  - glm5_twin_dir(fp8): the pair `--seed 3 --pow2-scales` in FP8 and BF16, whose weights are
//    exactly equal (power-of-two block scales make every dequantized e4m3 value a bf16 value).
#pragma once
#include <cstdint>
#include <string>

namespace dsa::test {
const std::string& glm5_tiny_dir();

constexpr int64_t kGlm5DenseTopk = 512;
const std::string& glm5_tiny_dense_dir();

const std::string& glm5_tiny_bf16_dir();
const std::string& glm5_tiny_transformers_dir();
const std::string& glm5_twin_dir(bool fp8);
}  // namespace dsa::test
