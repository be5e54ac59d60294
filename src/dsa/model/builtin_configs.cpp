// Built-in model configurations (docs/model-reference.md §1): the released DeepSeek-V4-Flash,
// DeepSeek-V4-Pro and GLM-5.1 architectures, so that tools (`dsa select`, benchmarks, KV sizing)
// work without a checkpoint on disk. Loading a checkpoint parses its config.json instead.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "dsa/core/error.h"
#include "dsa/model/config.h"

namespace dsa::model {

namespace {

// V4 schedule: `head` leading layers of ratio `head_ratio`, then CSA (4) and HCA (128)
// alternating, starting with CSA. The MTP layer is sliding-only (trailing 0 in the official list).
std::vector<int> v4_ratios(int layers, int head_ratio) {
  std::vector<int> r;
  for (int i = 0; i < layers; ++i) r.push_back(i < 2 ? head_ratio : ((i - 2) % 2 == 0 ? 4 : 128));
  return r;
}

ModelConfig deepseek_v4_common() {
  ModelConfig c;
  c.arch = Arch::DeepseekV4;
  c.num_kv_heads = 1;
  c.vocab_size = 129280;
  c.max_position_embeddings = 1048576;
  c.rms_norm_eps = 1e-6;
  c.head_dim = 512;
  c.qk_nope_head_dim = 448;
  c.qk_rope_head_dim = 64;
  c.v_head_dim = 512;
  c.kv_lora_rank = 0;
  c.o_lora_rank = 1024;
  c.sliding_window = 128;
  c.index_n_heads = 64;
  c.index_head_dim = 128;
  c.num_experts_per_tok = 6;
  c.n_shared_experts = 1;
  c.scoring_func = "sqrtsoftplus";
  c.num_hash_layers = 3;
  c.swiglu_limit = 10.0;
  c.hc_mult = 4;
  c.hc_sinkhorn_iters = 20;
  c.hc_eps = 1e-6;
  c.num_mtp_layers = 1;
  c.mtp_compress_ratios = {0};
  c.rope = RopeConfig{10000.0, "default"};
  c.compress_rope = RopeConfig{160000.0, "yarn", 16.0, 65536, 32.0, 1.0, 1.0};
  c.quant = QuantConfig{"fp8", "e4m3", "ue8m0", 128, 128, "fp4"};
  return c;
}

ModelConfig deepseek_v4_flash() {
  ModelConfig c = deepseek_v4_common();
  c.name = "deepseek-v4-flash";
  c.hidden_size = 4096;
  c.num_layers = 43;
  c.num_heads = 64;
  c.q_lora_rank = 1024;
  c.o_groups = 8;
  c.index_topk = 512;
  c.n_routed_experts = 256;
  c.moe_intermediate_size = 2048;
  c.routed_scaling_factor = 1.5;
  c.compress_ratios = v4_ratios(43, 0);
  return c;
}

ModelConfig deepseek_v4_pro() {
  ModelConfig c = deepseek_v4_common();
  c.name = "deepseek-v4-pro";
  c.hidden_size = 7168;
  c.num_layers = 61;
  c.num_heads = 128;
  c.q_lora_rank = 1536;
  c.o_groups = 16;
  c.index_topk = 1024;
  c.n_routed_experts = 384;
  c.moe_intermediate_size = 3072;
  c.routed_scaling_factor = 2.5;
  c.compress_ratios = v4_ratios(61, 128);
  return c;
}

// GLM-5.1 as released for FP8 inference (128x128 block-scaled e4m3 with fp32 scales).
ModelConfig glm_5_1() {
  ModelConfig c;
  c.name = "glm-5.1";
  c.arch = Arch::GlmMoeDsa;
  c.hidden_size = 6144;
  c.num_layers = 78;
  c.num_mtp_layers = 1;
  c.num_heads = 64;
  c.num_kv_heads = 64;
  c.vocab_size = 154880;
  c.max_position_embeddings = 202752;
  c.rms_norm_eps = 1e-5;
  c.head_dim = 256;
  c.qk_nope_head_dim = 192;
  c.qk_rope_head_dim = 64;
  c.v_head_dim = 256;
  c.q_lora_rank = 2048;
  c.kv_lora_rank = 512;
  c.indexer_types.assign(78, "full");
  c.index_n_heads = 32;
  c.index_head_dim = 128;
  c.index_topk = 2048;
  c.n_routed_experts = 256;
  c.num_experts_per_tok = 8;
  c.n_shared_experts = 1;
  c.moe_intermediate_size = 2048;
  c.first_k_dense_replace = 3;
  c.intermediate_size = 12288;
  c.routed_scaling_factor = 2.5;
  c.scoring_func = "sigmoid";
  c.rope = RopeConfig{1e6, "default"};
  c.quant = QuantConfig{"fp8", "e4m3", "float32", 128, 128, "fp8"};
  return c;
}

}  // namespace

const std::vector<std::string>& builtin_model_names() {
  static const std::vector<std::string> n = {"deepseek-v4-flash", "deepseek-v4-pro", "glm-5.1"};
  return n;
}

bool is_builtin_model(std::string_view name) {
  for (const auto& n : builtin_model_names())
    if (n == name) return true;
  return false;
}

ModelConfig builtin_model_config(std::string_view name) {
  ModelConfig c;
  if (name == "deepseek-v4-flash")
    c = deepseek_v4_flash();
  else if (name == "deepseek-v4-pro")
    c = deepseek_v4_pro();
  else if (name == "glm-5.1")
    c = glm_5_1();
  else
    fail("unknown built-in model '{}' (known: {})", name, fmt::join(builtin_model_names(), ", "));
  c.validate();
  return c;
}

}  // namespace dsa::model
