// Model configurations: built-ins against docs/model-reference.md §1, and config.json parsing in the
// three spellings (official DeepSeek/GLM files, DeepSeek inference ModelArgs, transformers 5.17).
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "common/testing.h"
#include "dsa/core/error.h"
#include "dsa/model/config.h"

#ifndef EXPECT_HAS
#define EXPECT_HAS(haystack, needle) EXPECT_NE(std::string(haystack).find(needle), std::string::npos) << (haystack)
#endif

using dsa::test::error_of;

using namespace dsa;
using namespace dsa::model;
using attn::CacheRole;
using attn::LayerKind;

namespace {

int count(const std::vector<int>& v, int x) { return static_cast<int>(std::count(v.begin(), v.end(), x)); }

// Every architecture field of two configs (not the name).
void expect_same_architecture(const ModelConfig& a, const ModelConfig& b) {
  EXPECT_EQ(a.arch, b.arch);
  EXPECT_EQ(a.hidden_size, b.hidden_size);
  EXPECT_EQ(a.num_layers, b.num_layers);
  EXPECT_EQ(a.num_mtp_layers, b.num_mtp_layers);
  EXPECT_EQ(a.num_heads, b.num_heads);
  EXPECT_EQ(a.num_kv_heads, b.num_kv_heads);
  EXPECT_EQ(a.vocab_size, b.vocab_size);
  EXPECT_EQ(a.max_position_embeddings, b.max_position_embeddings);
  EXPECT_DOUBLE_EQ(a.rms_norm_eps, b.rms_norm_eps);
  EXPECT_EQ(a.head_dim, b.head_dim);
  EXPECT_EQ(a.qk_nope_head_dim, b.qk_nope_head_dim);
  EXPECT_EQ(a.qk_rope_head_dim, b.qk_rope_head_dim);
  EXPECT_EQ(a.v_head_dim, b.v_head_dim);
  EXPECT_EQ(a.q_lora_rank, b.q_lora_rank);
  EXPECT_EQ(a.kv_lora_rank, b.kv_lora_rank);
  EXPECT_EQ(a.o_groups, b.o_groups);
  EXPECT_EQ(a.o_lora_rank, b.o_lora_rank);
  EXPECT_EQ(a.sliding_window, b.sliding_window);
  EXPECT_EQ(a.compress_ratios, b.compress_ratios);
  EXPECT_EQ(a.mtp_compress_ratios, b.mtp_compress_ratios);
  EXPECT_EQ(a.indexer_types, b.indexer_types);
  EXPECT_EQ(a.index_n_heads, b.index_n_heads);
  EXPECT_EQ(a.index_head_dim, b.index_head_dim);
  EXPECT_EQ(a.index_topk, b.index_topk);
  EXPECT_EQ(a.n_routed_experts, b.n_routed_experts);
  EXPECT_EQ(a.num_experts_per_tok, b.num_experts_per_tok);
  EXPECT_EQ(a.n_shared_experts, b.n_shared_experts);
  EXPECT_EQ(a.moe_intermediate_size, b.moe_intermediate_size);
  EXPECT_EQ(a.first_k_dense_replace, b.first_k_dense_replace);
  EXPECT_DOUBLE_EQ(a.routed_scaling_factor, b.routed_scaling_factor);
  EXPECT_EQ(a.scoring_func, b.scoring_func);
  EXPECT_EQ(a.num_hash_layers, b.num_hash_layers);
  EXPECT_DOUBLE_EQ(a.swiglu_limit, b.swiglu_limit);
  EXPECT_EQ(a.hc_mult, b.hc_mult);
  EXPECT_EQ(a.hc_sinkhorn_iters, b.hc_sinkhorn_iters);
  EXPECT_DOUBLE_EQ(a.hc_eps, b.hc_eps);
  for (auto [ra, rb] : {std::pair{a.rope, b.rope}, std::pair{a.compress_rope, b.compress_rope}}) {
    EXPECT_DOUBLE_EQ(ra.theta, rb.theta);
    EXPECT_EQ(ra.type, rb.type);
    if (ra.type == "yarn") {
      EXPECT_DOUBLE_EQ(ra.factor, rb.factor);
      EXPECT_EQ(ra.original_max_position, rb.original_max_position);
      EXPECT_DOUBLE_EQ(ra.beta_fast, rb.beta_fast);
      EXPECT_DOUBLE_EQ(ra.beta_slow, rb.beta_slow);
      EXPECT_DOUBLE_EQ(ra.attention_factor, rb.attention_factor);
    }
  }
  EXPECT_EQ(a.quant.method, b.quant.method);
  EXPECT_EQ(a.quant.fmt, b.quant.fmt);
  EXPECT_EQ(a.quant.scale_fmt, b.quant.scale_fmt);
  EXPECT_EQ(a.quant.block_n, b.quant.block_n);
  EXPECT_EQ(a.quant.block_k, b.quant.block_k);
  EXPECT_EQ(a.quant.expert_dtype, b.quant.expert_dtype);
}

std::string json_int_list(const std::vector<int>& v) { return fmt::format("[{}]", fmt::join(v, ",")); }

std::string v4_layer_types(const std::vector<int>& ratios) {
  std::string s = "[";
  for (size_t i = 0; i < ratios.size(); ++i) {
    const char* t = ratios[i] == 0 ? "sliding_attention" : ratios[i] == 4 ? "compressed_sparse_attention"
                                                                            : "heavily_compressed_attention";
    s += std::string(i ? "," : "") + "\"" + t + "\"";
  }
  return s + "]";
}

// The official DeepSeek-V4-Flash config.json shape (HF-style names, compress_ratios with the MTP
// layer's trailing 0, rope_scaling = YaRN of the compressed branches).
std::string official_v4_flash_json() {
  std::vector<int> r = builtin_model_config("deepseek-v4-flash").compress_ratios;
  r.push_back(0);
  return R"({
    "architectures": ["DeepseekV4ForCausalLM"], "model_type": "deepseek_v4",
    "hidden_size": 4096, "num_hidden_layers": 43, "num_attention_heads": 64, "num_key_value_heads": 1,
    "head_dim": 512, "qk_rope_head_dim": 64, "q_lora_rank": 1024, "o_groups": 8, "o_lora_rank": 1024,
    "sliding_window": 128, "compress_ratios": )" + json_int_list(r) + R"(,
    "compress_rope_theta": 160000.0, "rope_theta": 10000,
    "rope_scaling": {"beta_fast": 32, "beta_slow": 1, "factor": 16, "original_max_position_embeddings": 65536, "type": "yarn"},
    "index_n_heads": 64, "index_head_dim": 128, "index_topk": 512,
    "n_routed_experts": 256, "num_experts_per_tok": 6, "n_shared_experts": 1, "moe_intermediate_size": 2048,
    "routed_scaling_factor": 1.5, "scoring_func": "sqrtsoftplus", "topk_method": "noaux_tc", "norm_topk_prob": true,
    "num_hash_layers": 3, "swiglu_limit": 10.0, "hc_mult": 4, "hc_sinkhorn_iters": 20, "hc_eps": 1e-06,
    "rms_norm_eps": 1e-06, "vocab_size": 129280, "max_position_embeddings": 1048576, "num_nextn_predict_layers": 1,
    "tie_word_embeddings": false, "torch_dtype": "bfloat16", "expert_dtype": "fp4",
    "quantization_config": {"activation_scheme": "dynamic", "fmt": "e4m3", "quant_method": "fp8",
                            "scale_fmt": "ue8m0", "weight_block_size": [128, 128]}
  })";
}

}  // namespace

TEST(BuiltinConfigs, NamesAndUnknown) {
  EXPECT_EQ(builtin_model_names(), (std::vector<std::string>{"deepseek-v4-flash", "deepseek-v4-pro", "glm-5.1"}));
  for (const auto& n : builtin_model_names()) {
    ModelConfig c = builtin_model_config(n);
    EXPECT_EQ(c.name, n);
    EXPECT_NO_THROW(c.validate());
  }
  EXPECT_EQ(error_of([] { builtin_model_config("deepseek-v3"); }),
            "unknown built-in model 'deepseek-v3' (known: deepseek-v4-flash, deepseek-v4-pro, glm-5.1)");
}

TEST(BuiltinConfigs, DeepseekV4FlashMatchesReference) {
  ModelConfig c = builtin_model_config("deepseek-v4-flash");
  EXPECT_EQ(c.arch, Arch::DeepseekV4);
  EXPECT_EQ(arch_name(c.arch), "deepseek_v4");
  EXPECT_EQ(c.hidden_size, 4096);
  EXPECT_EQ(c.num_layers, 43);
  EXPECT_EQ(c.num_heads, 64);
  EXPECT_EQ(c.num_kv_heads, 1);
  EXPECT_EQ(c.head_dim, 512);
  EXPECT_EQ(c.qk_nope_head_dim, 448);
  EXPECT_EQ(c.qk_rope_head_dim, 64);
  EXPECT_EQ(c.q_lora_rank, 1024);
  EXPECT_EQ(c.o_groups, 8);
  EXPECT_EQ(c.o_lora_rank, 1024);
  EXPECT_EQ(c.sliding_window, 128);
  EXPECT_EQ(c.index_n_heads, 64);
  EXPECT_EQ(c.index_head_dim, 128);
  EXPECT_EQ(c.index_topk, 512);
  EXPECT_EQ(c.n_routed_experts, 256);
  EXPECT_EQ(c.num_experts_per_tok, 6);
  EXPECT_EQ(c.n_shared_experts, 1);
  EXPECT_EQ(c.moe_intermediate_size, 2048);
  EXPECT_DOUBLE_EQ(c.routed_scaling_factor, 1.5);
  EXPECT_EQ(c.num_hash_layers, 3);
  EXPECT_EQ(c.hc_mult, 4);
  EXPECT_EQ(c.hc_sinkhorn_iters, 20);
  EXPECT_DOUBLE_EQ(c.hc_eps, 1e-6);
  EXPECT_EQ(c.vocab_size, 129280);
  EXPECT_EQ(c.num_mtp_layers, 1);
  EXPECT_EQ(c.mtp_compress_ratios, (std::vector<int>{0}));
  // [0, 0, 4, 128, 4, 128, ..., 4]
  ASSERT_EQ(c.compress_ratios.size(), 43u);
  EXPECT_EQ(c.compress_ratios[0], 0);
  EXPECT_EQ(c.compress_ratios[1], 0);
  EXPECT_EQ(c.compress_ratios[2], 4);
  EXPECT_EQ(c.compress_ratios[3], 128);
  EXPECT_EQ(c.compress_ratios[42], 4);
  EXPECT_EQ(count(c.compress_ratios, 0), 2);
  EXPECT_EQ(count(c.compress_ratios, 4), 21);
  EXPECT_EQ(count(c.compress_ratios, 128), 20);
  EXPECT_DOUBLE_EQ(c.rope.theta, 10000.0);
  EXPECT_EQ(c.rope.type, "default");
  EXPECT_DOUBLE_EQ(c.compress_rope.theta, 160000.0);
  EXPECT_EQ(c.compress_rope.type, "yarn");
  EXPECT_DOUBLE_EQ(c.compress_rope.factor, 16.0);
  EXPECT_EQ(c.compress_rope.original_max_position, 65536);
  EXPECT_DOUBLE_EQ(c.compress_rope.beta_fast, 32.0);
  EXPECT_DOUBLE_EQ(c.compress_rope.beta_slow, 1.0);
  EXPECT_DOUBLE_EQ(c.compress_rope.attention_factor, 1.0);
  EXPECT_EQ(c.quant.method, "fp8");
  EXPECT_EQ(c.quant.fmt, "e4m3");
  EXPECT_EQ(c.quant.scale_fmt, "ue8m0");
  EXPECT_EQ(c.quant.block_n, 128);
  EXPECT_EQ(c.quant.block_k, 128);
  EXPECT_EQ(c.quant.expert_dtype, "fp4");
  EXPECT_FLOAT_EQ(c.softmax_scale(), 1.f / std::sqrt(512.f));
}

TEST(BuiltinConfigs, DeepseekV4ProMatchesReference) {
  ModelConfig c = builtin_model_config("deepseek-v4-pro");
  EXPECT_EQ(c.hidden_size, 7168);
  EXPECT_EQ(c.num_layers, 61);
  EXPECT_EQ(c.num_heads, 128);
  EXPECT_EQ(c.q_lora_rank, 1536);
  EXPECT_EQ(c.o_groups, 16);
  EXPECT_EQ(c.o_lora_rank, 1024);
  EXPECT_EQ(c.index_topk, 1024);
  EXPECT_EQ(c.n_routed_experts, 384);
  EXPECT_EQ(c.num_experts_per_tok, 6);
  EXPECT_EQ(c.moe_intermediate_size, 3072);
  EXPECT_DOUBLE_EQ(c.routed_scaling_factor, 2.5);
  // [128, 128, 4, 128, ..., 4]
  ASSERT_EQ(c.compress_ratios.size(), 61u);
  EXPECT_EQ(c.compress_ratios[0], 128);
  EXPECT_EQ(c.compress_ratios[1], 128);
  EXPECT_EQ(c.compress_ratios[2], 4);
  EXPECT_EQ(c.compress_ratios[60], 4);
  EXPECT_EQ(count(c.compress_ratios, 0), 0);
  EXPECT_EQ(count(c.compress_ratios, 4), 30);
  EXPECT_EQ(count(c.compress_ratios, 128), 31);
  EXPECT_EQ(c.mtp_compress_ratios, (std::vector<int>{0}));
}

TEST(BuiltinConfigs, Glm51MatchesReference) {
  ModelConfig c = builtin_model_config("glm-5.1");
  EXPECT_EQ(c.arch, Arch::GlmMoeDsa);
  EXPECT_EQ(arch_name(c.arch), "glm_moe_dsa");
  EXPECT_EQ(c.hidden_size, 6144);
  EXPECT_EQ(c.num_layers, 78);
  EXPECT_EQ(c.num_heads, 64);
  EXPECT_EQ(c.q_lora_rank, 2048);
  EXPECT_EQ(c.kv_lora_rank, 512);
  EXPECT_EQ(c.qk_nope_head_dim, 192);
  EXPECT_EQ(c.qk_rope_head_dim, 64);
  EXPECT_EQ(c.v_head_dim, 256);
  EXPECT_EQ(c.index_n_heads, 32);
  EXPECT_EQ(c.index_head_dim, 128);
  EXPECT_EQ(c.index_topk, 2048);
  EXPECT_EQ(c.n_routed_experts, 256);
  EXPECT_EQ(c.num_experts_per_tok, 8);
  EXPECT_EQ(c.n_shared_experts, 1);
  EXPECT_EQ(c.moe_intermediate_size, 2048);
  EXPECT_EQ(c.first_k_dense_replace, 3);
  EXPECT_EQ(c.intermediate_size, 12288);
  EXPECT_EQ(c.scoring_func, "sigmoid");
  EXPECT_EQ(c.n_group, 1);
  EXPECT_DOUBLE_EQ(c.routed_scaling_factor, 2.5);
  EXPECT_DOUBLE_EQ(c.rope.theta, 1e6);
  EXPECT_DOUBLE_EQ(c.rms_norm_eps, 1e-5);
  EXPECT_EQ(c.vocab_size, 154880);
  EXPECT_EQ(c.num_mtp_layers, 1);
  EXPECT_EQ(c.sliding_window, 0);
  EXPECT_EQ(c.hc_mult, 0);
  EXPECT_EQ(c.indexer_types, std::vector<std::string>(78, "full"));
  EXPECT_FLOAT_EQ(c.softmax_scale(), 1.f / 16.f);  // (192 + 64)^-0.5
}

TEST(AttentionLayers, DeepseekV4Flash) {
  auto layers = builtin_model_config("deepseek-v4-flash").attention_layers();
  ASSERT_EQ(layers.size(), 3u);
  struct Expect {
    LayerKind kind;
    int layers, mtp, ratio, topk;
    std::vector<CacheRole> caches;
  };
  const Expect e[] = {
      {LayerKind::Sliding, 2, 1, 0, 0, {CacheRole::SlidingWindow}},
      {LayerKind::Csa, 21, 0, 4, 512, {CacheRole::SlidingWindow, CacheRole::Compressed, CacheRole::IndexerKeys}},
      {LayerKind::Hca, 20, 0, 128, 0, {CacheRole::SlidingWindow, CacheRole::Compressed}},
  };
  for (size_t i = 0; i < 3; ++i) {
    const auto& l = layers[i];
    SCOPED_TRACE(std::string(attn::layer_kind_name(l.kind)));
    EXPECT_EQ(l.kind, e[i].kind);
    EXPECT_EQ(l.num_layers, e[i].layers);
    EXPECT_EQ(l.num_mtp_layers, e[i].mtp);
    EXPECT_EQ(l.compress_ratio, e[i].ratio);
    EXPECT_EQ(l.topk, e[i].topk);
    EXPECT_EQ(l.attends_all_compressed, e[i].kind == LayerKind::Hca);
    EXPECT_EQ(l.num_heads, 64);
    EXPECT_EQ(l.head_size, 512);
    EXPECT_EQ(l.v_head_size, 512);
    EXPECT_EQ(l.window, 128);
    EXPECT_TRUE(l.sink);
    EXPECT_EQ(l.model_kv_dtype, attn::KvCacheDtype::Fp8Model1);
    ASSERT_EQ(l.caches.size(), e[i].caches.size());
    for (size_t k = 0; k < l.caches.size(); ++k) {
      EXPECT_EQ(l.caches[k].role, e[i].caches[k]);
      EXPECT_EQ(l.caches[k].layers, e[i].layers + e[i].mtp);
      EXPECT_EQ(l.caches[k].attention_read, l.caches[k].role != CacheRole::IndexerKeys);
      EXPECT_EQ(l.caches[k].window_bounded, l.caches[k].role == CacheRole::SlidingWindow);
      EXPECT_EQ(l.caches[k].ratio, l.caches[k].role == CacheRole::SlidingWindow ? 1 : e[i].ratio);
    }
  }
}

TEST(AttentionLayers, DeepseekV4ProHasNoSlidingMainLayers) {
  auto layers = builtin_model_config("deepseek-v4-pro").attention_layers();
  ASSERT_EQ(layers.size(), 3u);
  EXPECT_EQ(layers[0].kind, LayerKind::Sliding);
  EXPECT_EQ(layers[0].num_layers, 0);
  EXPECT_EQ(layers[0].num_mtp_layers, 1);
  EXPECT_EQ(layers[1].num_layers, 30);
  EXPECT_EQ(layers[1].topk, 1024);
  EXPECT_EQ(layers[2].num_layers, 31);
  for (const auto& l : layers) EXPECT_EQ(l.num_heads, 128);
}

TEST(AttentionLayers, Glm51) {
  auto layers = builtin_model_config("glm-5.1").attention_layers();
  ASSERT_EQ(layers.size(), 1u);
  const auto& l = layers[0];
  EXPECT_EQ(l.kind, LayerKind::MlaSparse);
  EXPECT_EQ(attn::layer_kind_name(l.kind), "mla_sparse");
  EXPECT_EQ(l.num_layers, 78);
  EXPECT_EQ(l.num_mtp_layers, 1);
  EXPECT_EQ(l.num_heads, 64);
  EXPECT_EQ(l.head_size, 576);
  EXPECT_EQ(l.v_head_size, 512);
  EXPECT_EQ(l.topk, 2048);
  EXPECT_FALSE(l.sink);
  EXPECT_EQ(l.window, 0);
  EXPECT_EQ(l.model_kv_dtype, attn::KvCacheDtype::Fp8DsMla);
  ASSERT_EQ(l.caches.size(), 2u);
  EXPECT_EQ(l.caches[0].role, CacheRole::Latent);
  EXPECT_EQ(l.caches[0].layers, 79);
  EXPECT_EQ(l.caches[1].role, CacheRole::IndexerKeys);
  EXPECT_EQ(l.caches[1].layers, 79);
  EXPECT_FALSE(l.caches[1].attention_read);
}

TEST(ConfigJson, OfficialDeepseekV4Flash) {
  ModelConfig c = parse_model_config_json(official_v4_flash_json(), "flash/config.json");
  EXPECT_EQ(c.name, "flash/config.json");
  expect_same_architecture(c, builtin_model_config("deepseek-v4-flash"));
}

TEST(ConfigJson, TransformersDeepseekV4Flash) {
  // transformers 5.17: layer_types + compress_rates, mlp_layer_types, nested rope_parameters,
  // partial_rotary_factor instead of qk_rope_head_dim; layer_types has no MTP entry.
  ModelConfig ref = builtin_model_config("deepseek-v4-flash");
  std::string mlp = "[";
  for (int i = 0; i < 43; ++i) mlp += std::string(i ? "," : "") + (i < 3 ? "\"hash_moe\"" : "\"moe\"");
  mlp += "]";
  std::string text = R"({
    "model_type": "deepseek_v4", "hidden_size": 4096, "num_hidden_layers": 43, "num_attention_heads": 64,
    "num_key_value_heads": 1, "head_dim": 512, "partial_rotary_factor": 0.125, "q_lora_rank": 1024,
    "o_groups": 8, "o_lora_rank": 1024, "sliding_window": 128,
    "layer_types": )" + v4_layer_types(ref.compress_ratios) + R"(,
    "compress_rates": {"compressed_sparse_attention": 4, "heavily_compressed_attention": 128},
    "mlp_layer_types": )" + mlp + R"(,
    "rope_parameters": {"main": {"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.125},
                        "compress": {"rope_type": "yarn", "rope_theta": 160000.0, "factor": 16,
                                     "original_max_position_embeddings": 65536, "beta_fast": 32, "beta_slow": 1,
                                     "attention_factor": 1.0, "partial_rotary_factor": 0.125}},
    "index_n_heads": 64, "index_head_dim": 128, "index_topk": 512, "n_routed_experts": 256,
    "num_experts_per_tok": 6, "n_shared_experts": 1, "moe_intermediate_size": 2048,
    "routed_scaling_factor": 1.5, "scoring_func": "sqrtsoftplus", "swiglu_limit": 10.0, "hc_mult": 4,
    "hc_sinkhorn_iters": 20, "hc_eps": 1e-06, "rms_norm_eps": 1e-06, "vocab_size": 129280,
    "max_position_embeddings": 1048576, "num_nextn_predict_layers": 1, "expert_dtype": "fp4",
    "quantization_config": {"fmt": "e4m3", "quant_method": "fp8", "scale_fmt": "ue8m0", "weight_block_size": [128, 128]}
  })";
  expect_same_architecture(parse_model_config_json(text, "hf/config.json"), ref);
}

TEST(ConfigJson, InferenceModelArgsDeepseekV4Pro) {
  // DeepSeek's inference ModelArgs names; no model_type (inferred from compress_ratios + hc_mult).
  ModelConfig ref = builtin_model_config("deepseek-v4-pro");
  std::vector<int> r = ref.compress_ratios;
  r.push_back(0);
  std::string text = R"({
    "vocab_size": 129280, "dim": 7168, "moe_inter_dim": 3072, "n_layers": 61, "n_hash_layers": 3,
    "n_mtp_layers": 1, "n_heads": 128, "n_routed_experts": 384, "n_shared_experts": 1,
    "n_activated_experts": 6, "score_func": "sqrtsoftplus", "route_scale": 2.5, "swiglu_limit": 10.0,
    "q_lora_rank": 1536, "head_dim": 512, "rope_head_dim": 64, "norm_eps": 1e-6, "o_groups": 16,
    "o_lora_rank": 1024, "window_size": 128, "compress_ratios": )" + json_int_list(r) + R"(,
    "compress_rope_theta": 160000.0, "original_seq_len": 65536, "rope_theta": 10000.0, "rope_factor": 16,
    "beta_fast": 32, "beta_slow": 1, "index_n_heads": 64, "index_head_dim": 128, "index_topk": 1024,
    "hc_mult": 4, "hc_sinkhorn_iters": 20, "hc_eps": 1e-6,
    "dtype": "fp8", "scale_fmt": "ue8m0", "expert_dtype": "fp4"
  })";
  expect_same_architecture(parse_model_config_json(text, "inference/config.json"), ref);
}

TEST(ConfigJson, OfficialGlm51) {
  ModelConfig ref = builtin_model_config("glm-5.1");
  std::string text = R"({
    "architectures": ["GlmMoeDsaForCausalLM"], "model_type": "glm_moe_dsa", "hidden_size": 6144,
    "num_hidden_layers": 78, "num_attention_heads": 64, "num_key_value_heads": 64, "head_dim": 64,
    "qk_head_dim": 256, "qk_nope_head_dim": 192, "qk_rope_head_dim": 64, "v_head_dim": 256,
    "q_lora_rank": 2048, "kv_lora_rank": 512, "index_n_heads": 32, "index_head_dim": 128, "index_topk": 2048,
    "indexer_rope_interleave": true, "n_routed_experts": 256, "num_experts_per_tok": 8, "n_shared_experts": 1,
    "moe_intermediate_size": 2048, "intermediate_size": 12288, "first_k_dense_replace": 3, "n_group": 1,
    "topk_group": 1, "routed_scaling_factor": 2.5, "scoring_func": "sigmoid", "topk_method": "noaux_tc",
    "norm_topk_prob": true, "rope_theta": 1000000, "rms_norm_eps": 1e-05, "vocab_size": 154880,
    "max_position_embeddings": 202752, "num_nextn_predict_layers": 1, "tie_word_embeddings": false,
    "quantization_config": {"activation_scheme": "dynamic", "fmt": "e4m3", "quant_method": "fp8",
                            "weight_block_size": [128, 128]}
  })";
  ModelConfig c = parse_model_config_json(text, "glm/config.json");
  expect_same_architecture(c, ref);
  EXPECT_EQ(c.head_dim, 256);  // not transformers' head_dim (= qk_rope_head_dim)
}

TEST(ConfigJson, TransformersGlmPatterns) {
  auto glm = [](const std::string& extra) {
    return R"({"model_type": "glm_moe_dsa", "hidden_size": 64, "num_hidden_layers": 6,
               "num_attention_heads": 4, "vocab_size": 1000, "q_lora_rank": 32,
               "rope_parameters": {"rope_theta": 1000000, "rope_type": "default"})" +
           extra + "}";
  };
  ModelConfig c = parse_model_config_json(glm(""), "a.json");
  EXPECT_EQ(c.indexer_types, std::vector<std::string>(6, "full"));  // index_topk_freq 1
  EXPECT_DOUBLE_EQ(c.rope.theta, 1e6);
  EXPECT_EQ(c.first_k_dense_replace, 3);
  EXPECT_EQ(c.quant.method, "none");
  EXPECT_EQ(c.quant.expert_dtype, "bf16");
  EXPECT_EQ(c.num_mtp_layers, 0);

  c = parse_model_config_json(glm(R"(, "index_topk_freq": 2, "index_skip_topk_offset": 2,
                                       "mlp_layer_types": ["dense", "sparse", "sparse", "sparse", "sparse", "sparse"])"),
                              "b.json");
  // transformers: full iff max(i - offset + 1, 0) % freq == 0
  EXPECT_EQ(c.indexer_types, (std::vector<std::string>{"full", "full", "shared", "full", "shared", "full"}));
  EXPECT_EQ(c.first_k_dense_replace, 1);

  c = parse_model_config_json(glm(R"(, "index_topk_pattern": "FFSFSS")"), "c.json");
  EXPECT_EQ(c.indexer_types, (std::vector<std::string>{"full", "full", "shared", "full", "shared", "shared"}));
  auto l = c.attention_layers();
  ASSERT_EQ(l.size(), 1u);
  EXPECT_EQ(l[0].caches[1].role, CacheRole::IndexerKeys);
  EXPECT_EQ(l[0].caches[1].layers, 3);  // only the full layers keep indexer keys

  c = parse_model_config_json(glm(R"(, "indexer_types": ["full", "shared", "shared", "full", "shared", "full"])"),
                              "d.json");
  EXPECT_EQ(c.indexer_types[5], "full");
}

TEST(ConfigJson, ErrorsNameFileFieldAndValue) {
  const std::string flash = official_v4_flash_json();
  auto with = [&](const std::string& from, const std::string& to) {
    auto at = flash.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    if (at == std::string::npos) return flash;
    return flash.substr(0, at) + to + flash.substr(at + from.size());
  };
  EXPECT_EQ(error_of([&] { parse_model_config_json(with("\"hidden_size\": 4096,", ""), "x/config.json"); }),
            "x/config.json: required field 'hidden_size' is missing (accepted names: hidden_size, dim)");
  EXPECT_EQ(error_of([&] {
              parse_model_config_json(with("\"num_hidden_layers\": 43", "\"num_hidden_layers\": \"43\""), "x/config.json");
            }),
            "x/config.json: field 'num_hidden_layers' = \"43\": expected an integer");
  EXPECT_EQ(error_of([&] {
              parse_model_config_json(with("\"hidden_size\": 4096,", "\"hidden_size\": 4096, \"dim\": 2048,"), "x/config.json");
            }),
            "x/config.json: fields 'hidden_size' = 4096 and 'dim' = 2048 disagree");
  EXPECT_EQ(error_of([&] { parse_model_config_json(with("[0,0,4,128,", "[0,0,8,128,"), "x/config.json"); }),
            "x/config.json: field 'compress_ratios[2]' = 8: must be 0 (sliding), 4 (CSA) or 128 (HCA)");
  auto tiny_v4 = [](const std::string& ratios) {
    return R"({"model_type": "deepseek_v4", "hidden_size": 8, "num_hidden_layers": 4, "num_attention_heads": 4,
               "vocab_size": 32, "num_nextn_predict_layers": 1, "compress_ratios": )" + ratios + "}";
  };
  EXPECT_EQ(error_of([&] { parse_model_config_json(tiny_v4("[0, 0, 4]"), "t.json"); }),
            "t.json: field 'compress_ratios' = [0,0,4]: has 3 entries, need one per layer (num_hidden_layers = 4)");
  // Entries beyond num_hidden_layers + num_nextn_predict_layers are ignored (with a log note).
  EXPECT_EQ(parse_model_config_json(tiny_v4("[0, 0, 4, 128, 0, 0]"), "t.json").mtp_compress_ratios,
            (std::vector<int>{0}));
  auto two_mtp = tiny_v4("[0, 0, 4, 128, 0]");
  const std::string one = "\"num_nextn_predict_layers\": 1";
  two_mtp.replace(two_mtp.find(one), one.size(), "\"num_nextn_predict_layers\": 2");
  EXPECT_EQ(error_of([&] { parse_model_config_json(two_mtp, "t.json"); }),
            "t.json: field 'compress_ratios' = [0,0,4,128,0]: has 5 entries: expected num_hidden_layers (4) or "
            "num_hidden_layers + MTP layers (6)");
  ModelConfig mtp_csa = parse_model_config_json(tiny_v4("[0, 0, 4, 128, 4]"), "t.json");
  EXPECT_EQ(mtp_csa.mtp_compress_ratios, (std::vector<int>{4}));  // counted with the csa layers
  EXPECT_EQ(mtp_csa.attention_layers()[1].num_mtp_layers, 1);
  EXPECT_EQ(error_of([&] { parse_model_config_json(with("\"o_groups\": 8", "\"o_groups\": 7"), "x/config.json"); }),
            "x/config.json: field 'o_groups' = 7: must divide num_attention_heads * head_dim (32768)");
  EXPECT_EQ(error_of([&] {
              parse_model_config_json(with("\"scale_fmt\": \"ue8m0\"", "\"scale_fmt\": \"e5m2\""), "x/config.json");
            }),
            "x/config.json: field 'quantization_config.scale_fmt' = e5m2: supported: ue8m0, float32");
  EXPECT_EQ(error_of([&] {
              parse_model_config_json(with("\"weight_block_size\": [128, 128]", "\"weight_block_size\": [128]"),
                                      "x/config.json");
            }),
            "x/config.json: field 'quantization_config.weight_block_size' = [128]: expected [n, k]");
  EXPECT_EQ(error_of([&] {
              parse_model_config_json(with("\"model_type\": \"deepseek_v4\"", "\"model_type\": \"llama\""), "x/config.json");
            }),
            "x/config.json: field 'model_type' = \"llama\": not supported (dsa runs deepseek_v4 and glm_moe_dsa)");
  EXPECT_EQ(error_of([&] {
              parse_model_config_json(with("\"type\": \"yarn\"", "\"type\": \"yarn\", \"factor\": \"16\""), "x/config.json");
            }),
            "x/config.json: field 'rope_scaling.factor' = \"16\": expected a number");
  std::string no_layers = with("\"compress_ratios\": ", "\"unused\": ");
  EXPECT_EQ(error_of([&] { parse_model_config_json(no_layers, "x/config.json"); }),
            "x/config.json: required field 'compress_ratios' is missing (accepted names: compress_ratios, layer_types)");
  EXPECT_EQ(error_of([] {
              parse_model_config_json(R"({"model_type": "deepseek_v4", "hidden_size": 8, "num_hidden_layers": 2,
                "num_attention_heads": 4, "vocab_size": 10, "layer_types": ["sliding_attention", "full_attention"]})",
                                      "t.json");
            }),
            "t.json: field 'layer_types[1]' = \"full_attention\": expected sliding_attention, "
            "compressed_sparse_attention or heavily_compressed_attention");
  EXPECT_EQ(error_of([] {
              parse_model_config_json(R"({"model_type": "glm_moe_dsa", "hidden_size": 8, "num_hidden_layers": 2,
                "num_attention_heads": 4, "vocab_size": 10, "indexer_types": ["shared", "full"]})",
                                      "g.json");
            }),
            "g.json: field 'indexer_types[0]' = shared: the first layer must run the indexer ('shared' reuses a "
            "previous full layer's top-k)");
  EXPECT_NE(error_of([] { parse_model_config_json("{\"model_type\": ", "bad.json"); }).find("bad.json: not valid JSON"),
            std::string::npos);
  EXPECT_EQ(error_of([] { parse_model_config_json("[1, 2]", "arr.json"); }),
            "arr.json: expected a JSON object at the top level");
  EXPECT_EQ(error_of([] { parse_model_config_json("{\"hidden_size\": 8}", "m.json"); }),
            "m.json: required field 'model_type' is missing (expected deepseek_v4 or glm_moe_dsa)");
}

TEST(ConfigJson, TinyTransformersConfigWithoutMtpEntries) {
  // The shape of transformers' CI tiny configs: 4 layers, compress_ratios without MTP entries.
  ModelConfig c = parse_model_config_json(R"({
    "model_type": "deepseek_v4", "hidden_size": 8, "num_hidden_layers": 4, "num_attention_heads": 4,
    "vocab_size": 32, "compress_ratios": [0, 0, 4, 128], "num_nextn_predict_layers": 1,
    "n_routed_experts": 4, "num_experts_per_tok": 2, "index_n_heads": 2,
    "compress_rope_parameters": {"beta_fast": 32, "beta_slow": 1, "factor": 16,
        "original_max_position_embeddings": 65536, "partial_rotary_factor": 0.125,
        "rope_theta": 160000.0, "rope_type": "yarn", "type": "yarn"}})", "tiny.json");
  EXPECT_EQ(c.compress_ratios, (std::vector<int>{0, 0, 4, 128}));
  EXPECT_EQ(c.mtp_compress_ratios, (std::vector<int>{0}));
  EXPECT_EQ(c.compress_rope.type, "yarn");
  EXPECT_EQ(c.quant.method, "none");
  auto layers = c.attention_layers();
  ASSERT_EQ(layers.size(), 3u);
  EXPECT_EQ(layers[0].num_layers, 2);
  EXPECT_EQ(layers[0].num_mtp_layers, 1);
  EXPECT_EQ(layers[0].num_heads, 4);
}

TEST(ConfigJson, LoadFromDirectoryFileAndBuiltin) {
  namespace fs = std::filesystem;
  fs::path dir = fs::temp_directory_path() / fmt::format("dsa_test_config_{}", test::test_seed());
  fs::create_directories(dir);
  {
    std::ofstream(dir / "config.json") << official_v4_flash_json();
  }
  ModelConfig a = load_model_config(dir.string());
  EXPECT_EQ(a.name, (dir / "config.json").string());
  expect_same_architecture(a, builtin_model_config("deepseek-v4-flash"));
  ModelConfig b = load_model_config((dir / "config.json").string());
  expect_same_architecture(b, a);
  EXPECT_EQ(load_model_config("glm-5.1").name, "glm-5.1");
  std::string missing = (dir / "nope").string();
  EXPECT_EQ(error_of([&] { load_model_config(missing); }),
            fmt::format("model '{}' is neither a built-in (deepseek-v4-flash, deepseek-v4-pro, glm-5.1) nor a "
                        "checkpoint directory with config.json nor a .json file",
                        missing));
  fs::remove_all(dir);
}

// Issue 20: sizes and counts from config.json are bounded before anything is sized by them, and
// every number outside its bound is an error naming the field and the value (config_bounds.h).
TEST(ConfigJson, HostileNumbersAreBoundedErrors) {
  const std::string base = R"({"model_type": "deepseek_v4", "hidden_size": 256, "num_hidden_layers": 4,
    "num_attention_heads": 4, "vocab_size": 512, "q_lora_rank": 128, "o_groups": 2, "o_lora_rank": 128,
    "n_routed_experts": 8, "num_experts_per_tok": 2, "moe_intermediate_size": 128, "index_n_heads": 4,
    "compress_ratios": [0, 4, 128, 4, 0], "num_nextn_predict_layers": 1)";
  auto v4 = [&](const std::string& extra) { return base + extra + "}"; };
  EXPECT_NO_THROW(parse_model_config_json(v4(""), "ok.json"));
  auto err = [&](const std::string& extra) { return error_of([&] { parse_model_config_json(v4(extra), "h.json"); }); };
  EXPECT_HAS(err(R"(, "rms_norm_eps": 1e400)"), "h.json: not valid JSON");
  EXPECT_HAS(err(R"(, "rms_norm_eps": 1e400)"), "number overflow");
  const std::string g = R"({"model_type": "glm_moe_dsa", "hidden_size": 64, "num_hidden_layers": 4,
    "num_attention_heads": 4, "vocab_size": 512, "q_lora_rank": 32)";
  auto glm = [&](const std::string& extra) {
    return error_of([&] { parse_model_config_json(g + extra + "}", "g.json"); });
  };
  EXPECT_NO_THROW(parse_model_config_json(g + "}", "g.json"));
  auto v4_with = [&](const std::string& field, const std::string& value) {
    nlohmann::json j = nlohmann::json::parse(base + "}");
    j[field] = nlohmann::json::parse(value);
    return error_of([&] { parse_model_config_json(j.dump(), "h.json"); });
  };
  EXPECT_EQ(v4_with("num_nextn_predict_layers", "-1"), "h.json: field 'num_nextn_predict_layers' = -1: must be in 0..16");
  EXPECT_EQ(v4_with("num_nextn_predict_layers", "10000000000"),
            "h.json: field 'num_nextn_predict_layers' = 10000000000: must be in 0..16");
  EXPECT_EQ(v4_with("num_hidden_layers", "1000000"), "h.json: field 'num_hidden_layers' = 1000000: must be in 1..1024");
  EXPECT_EQ(v4_with("hidden_size", "1e93"), "h.json: field 'hidden_size' = 1e+93: out of range");
  EXPECT_EQ(v4_with("hidden_size", "4096.5"), "h.json: field 'hidden_size' = 4096.5: expected an integer");
  EXPECT_EQ(v4_with("hidden_size", "18446744073709551615"),
            "h.json: field 'hidden_size' = 18446744073709551615: out of range");
  EXPECT_EQ(v4_with("hidden_size", "100000"), "h.json: field 'hidden_size' = 100000: must be in 1..65536");
  EXPECT_EQ(v4_with("index_topk", "1000000000"), "h.json: field 'index_topk' = 1000000000: must be in 1..65536");
  EXPECT_EQ(v4_with("hc_sinkhorn_iters", "1000000000"),
            "h.json: field 'hc_sinkhorn_iters' = 1000000000: must be in 1..1000");
  EXPECT_EQ(v4_with("vocab_size", "100000000"), "h.json: field 'vocab_size' = 100000000: must be in 1..16777216");
  EXPECT_EQ(v4_with("n_routed_experts", "100000"), "h.json: field 'n_routed_experts' = 100000: must be in 1..4096");
  EXPECT_EQ(v4_with("num_experts_per_tok", "0"),
            "h.json: field 'num_experts_per_tok' = 0: must be in 1..n_routed_experts (8) and at most 256");
  EXPECT_EQ(v4_with("compress_ratios", "[0, 4, 128, 4, 4294967296]"),
            "h.json: field 'compress_ratios[4]' = 4294967296: expected an integer (32-bit)");
  EXPECT_EQ(v4_with("partial_rotary_factor", "1e300"), "h.json: field 'partial_rotary_factor' = 1e+300: must be in (0, 1]");
  EXPECT_EQ(v4_with("hc_eps", "0"), "h.json: field 'hc_eps' = 0: must be finite and in (0, 1]");
  EXPECT_EQ(v4_with("routed_scaling_factor", "-1"),
            "h.json: field 'routed_scaling_factor' = -1: must be finite and in (0, 1000000]");
  EXPECT_EQ(v4_with("scoring_func", "\"softmax\""),
            "h.json: field 'scoring_func' = softmax: DeepSeek-V4 routes with sqrtsoftplus scores (the only one dsa "
            "implements for it)");
  // check-model used to accept these (its own reader): one reader now, for every command.
  EXPECT_EQ(glm(R"(, "num_experts_per_tok": 0)"),
            "g.json: field 'num_experts_per_tok' = 0: must be in 1..n_routed_experts (256) and at most 256");
  EXPECT_EQ(glm(R"(, "n_group": 0)"), "g.json: field 'n_group' = 0: must divide n_routed_experts (256)");
  EXPECT_EQ(glm(R"(, "topk_group": 2)"), "g.json: field 'topk_group' = 2: must be in 1..n_group (1)");
  EXPECT_EQ(glm(R"(, "rope_theta": -5)"), "g.json: field 'rope.theta' = -5: must be finite and in (0, 1000000000000]");
  EXPECT_EQ(glm(R"(, "max_position_embeddings": 0)"),
            "g.json: field 'max_position_embeddings' = 0: must be in 1..16777216");
  EXPECT_EQ(glm(R"(, "num_hidden_layers": 2147483648)"),
            "g.json: field 'num_hidden_layers' = 2147483648: must be in 1..1024");
  // Trailing schedule entries beyond the layers present are ignored (a note in the log).
  const auto c = parse_model_config_json(g + R"(, "indexer_types": ["full", "shared", "full", "shared", "full"]})", "g.json");
  EXPECT_EQ(c.indexer_types.size(), 4u);
  // Invalid UTF-8: the JSON parser refuses it (a clean error, never an exception from dump()).
  EXPECT_HAS(error_of([] { parse_model_config_json("{\"model_type\": \"glm_moe_dsa\", \"hidden_size\": \"\xff\"}", "u.json"); }),
             "u.json: not valid JSON");
}

// The DeepSeek-V4 release configs carry a compress_ratios entry for the MTP layer; checkpoints
// converted without the MTP layer keep it while num_nextn_predict_layers is 0.
TEST(ConfigJson, TrailingCompressRatioWithoutMtp) {
  const auto c = parse_model_config_json(R"({"model_type": "deepseek_v4", "hidden_size": 8, "num_hidden_layers": 4,
    "num_attention_heads": 4, "vocab_size": 32, "num_nextn_predict_layers": 0,
    "compress_ratios": [0, 0, 4, 128, 0]})", "t.json");
  EXPECT_EQ(c.num_mtp_layers, 0);
  EXPECT_EQ(c.compress_ratios, (std::vector<int>{0, 0, 4, 128}));
  EXPECT_TRUE(c.mtp_compress_ratios.empty());
}

TEST(ConfigJson, LoadRefusesFifoAndSymlinkLoop) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / fmt::format("dsa_test_config_fifo_{}", ::getpid());
  fs::remove_all(dir);
  fs::create_directories(dir / "fifo");
  ASSERT_EQ(::mkfifo((dir / "fifo" / "config.json").c_str(), 0600), 0);
  EXPECT_EQ(error_of([&] { load_model_config((dir / "fifo").string()); }),
            (dir / "fifo" / "config.json").string() + ": is a FIFO, not a regular file");
  fs::create_directories(dir / "loop");
  fs::create_symlink("config.json", dir / "loop" / "config.json");
  EXPECT_EQ(error_of([&] { load_model_config((dir / "loop").string()); }),
            (dir / "loop" / "config.json").string() + ": cannot access: Too many levels of symbolic links");
  fs::create_symlink("self", dir / "self");
  EXPECT_EQ(error_of([&] { load_model_config((dir / "self").string()); }),
            (dir / "self").string() + ": cannot access: Too many levels of symbolic links");
  fs::remove_all(dir);
}
