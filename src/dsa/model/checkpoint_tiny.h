// Tiny random checkpoints in the official formats, for tests, golden references and demos
// (`dsa make-tiny`). Shapes are small but keep every layer type:
//  - deepseek_v4: 4 layers with compress_ratios [0, 4, 128, 4] (sliding, CSA, HCA, CSA), hash
//    routing on layers 0-1 and routed MoE on 2-3, one MTP layer; FP8 (E4M3 + UE8M0 128x128 block
//    scales) projections, MXFP4 routed experts, BF16/F32 where the official checkpoint has them.
//  - glm_moe_dsa: 4 layers (1 dense + 3 MoE), indexer_types [full, shared, full, shared], one
//    MTP layer; FP8 (E4M3 + F32 weight_scale_inv) or BF16.
// Dimensions that carry FP8 128x128 blocks are <= 128 or multiples of 128 where the official
// model allows it, so transformers' FP8 dequantizer (which divides the weight evenly by the scale
// grid) loads the DeepSeek-V4 checkpoint; GLM's 576-row kv_a_proj_with_mqa (512 + 64, fixed by the
// KV layout) keeps its ceil-division grid as in the real checkpoint.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "dsa/model/deepseek_v4/schema.h"
#include "dsa/model/glm5/schema.h"

namespace dsa {

struct TinyOptions {
  std::string arch;          // "deepseek_v4" or "glm_moe_dsa"
  // "tiny" (the shapes above), or real shapes for load-time measurements: "flash" / "pro"
  // (deepseek_v4), "glm-5.1" (glm_moe_dsa); `layers` > 0 keeps only the first layers.
  std::string preset = "tiny";
  int64_t layers = 0;
  int64_t vocab = 0;         // > 0: this vocabulary size instead of the preset's (a tokenizer's size)
  // > 0: the dense and MoE intermediate sizes instead of the preset's (deepseek_v4: the experts'),
  // for tensor parallelism: each rank's slice must be a multiple of 128, e.g. 512 for 4 ranks
  int64_t intermediate = 0;
  // deepseek_v4: these dimensions instead of the preset's (start from tiny_deepseek_v4_dims();
  // tensor-parallel tests change o_groups, experts_per_tok); the options above still apply.
  std::optional<schema::DeepseekV4Dims> v4_dims;
  bool fast_fill = false;    // cheap pseudo-random bytes instead of quantized normal weights
  bool verbose = false;      // a line per shard on stderr
  uint64_t seed = 0;
  // false: BF16 everywhere (V4 experts stay MXFP4 unless fp4_experts=false). The BF16 checkpoint
  // is the twin of the FP8 one with the same seed and options: each weight that the FP8
  // checkpoint quantizes holds that FP8 weight dequantized and rounded to bf16 (exact with
  // power-of-two scales: V4's UE8M0, or GLM with pow2_scales; else within 2^-8 relative); every
  // other tensor is identical.
  bool fp8 = true;
  // GLM's fp32 weight_scale_inv rounded up to powers of two (as UE8M0 would be) instead of the
  // exact amax / 448: then FP8 and BF16 twins hold exactly the same weights.
  bool pow2_scales = false;
  bool fp4_experts = true;   // V4 only
  uint64_t max_shard_bytes = 4u << 20;  // several shards even for a tiny model
  // "transformers": the storage forms of checkpoints written with transformers 5.17 where they
  // differ from the release files (loader tests): DeepSeek-V4 without the MTP layer
  // (num_nextn_predict_layers 0) but with compress_ratios' trailing MTP entry, wo_a FP8 + UE8M0
  // .scale, attn_sink / gate.bias bf16, hc_*_base f16, norms f32; GLM e_score_correction_bias
  // bf16 and, FP8 checkpoints, indexer weights_proj FP8 + weight_scale_inv. Values are drawn as
  // for the release form and rounded where the variant's storage is narrower.
  std::string variant;
  // With `variant`: the same values in the release storage (no trailing compress_ratios entry,
  // wo_a / weights_proj as the bf16 of their FP8 values, small tensors in their release dtype):
  // the checkpoint the variant must be equivalent to.
  bool variant_canonical = false;
};

struct TinyCheckpoint {
  nlohmann::json config;     // what config.json holds
  size_t tensors = 0;
  uint64_t bytes = 0;
  size_t shards = 0;
};

schema::DeepseekV4Dims tiny_deepseek_v4_dims();
schema::Glm5Dims tiny_glm5_dims();
schema::DeepseekV4Dims preset_deepseek_v4_dims(const std::string& preset);  // "flash", "pro"
schema::Glm5Dims preset_glm5_dims(const std::string& preset);                // "glm-5.1"

// config.json contents (official field names; transformers 5.17 loads them too).
nlohmann::json deepseek_v4_config_json(const schema::DeepseekV4Dims& d, int64_t index_topk, int64_t sliding_window,
                                       double routed_scaling_factor = 1.5);
nlohmann::json glm5_config_json(const schema::Glm5Dims& d, int64_t index_topk);

// Writes config.json, model-0000k-of-0000n.safetensors and model.safetensors.index.json into
// `dir` (created if needed), one shard at a time (memory stays near one shard). Deterministic for
// a given seed.
TinyCheckpoint make_tiny_checkpoint(const TinyOptions& opt, const std::string& dir);

}  // namespace dsa
