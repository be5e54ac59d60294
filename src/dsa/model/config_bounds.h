// Bounds on every size and count of a ModelConfig, checked by ModelConfig::validate() (and by the
// config.json reader before it sizes anything by a count). They sit far above the released models
// (DeepSeek-V4-Pro: hidden 7168, 61 layers, 128 heads, 384 experts; GLM-5.1: vocab 154880, dense
// width 12288) and far below what would let a config.json alone exhaust memory or time: loading
// also compares the counts with the tensors the checkpoint holds before building any weight list.
// docs/config-bounds.md lists them with the reasons.
#pragma once
#include <cstdint>

namespace dsa::model::bounds {

inline constexpr int kMaxHidden = 65536;            // hidden_size
inline constexpr int kMaxLayers = 1024;             // num_hidden_layers
inline constexpr int kMaxMtpLayers = 16;            // num_nextn_predict_layers
inline constexpr int kMaxHeads = 1024;              // num_attention_heads, num_key_value_heads, index_n_heads
inline constexpr int kMaxVocab = 1 << 24;           // vocab_size (token ids are int32; one logits row is 64 MiB)
inline constexpr int kMaxHeadDim = 4096;            // head_dim, qk_nope/qk_rope/v_head_dim, index_head_dim
inline constexpr int kMaxRank = 65536;              // q_lora_rank, kv_lora_rank, o_lora_rank
inline constexpr int kMaxOGroups = 1024;            // o_groups
inline constexpr int kMaxSlidingWindow = 1 << 20;   // sliding_window
inline constexpr int kMaxIndexTopk = 65536;         // index_topk
inline constexpr int kMaxExperts = 4096;            // n_routed_experts, n_group
inline constexpr int kMaxExpertsPerTok = 256;       // num_experts_per_tok
inline constexpr int kMaxSharedExperts = 64;        // n_shared_experts
inline constexpr int kMaxIntermediate = 1 << 20;    // moe_intermediate_size, intermediate_size
inline constexpr int kMaxHcMult = 16;               // hc_mult
inline constexpr int kMaxSinkhornIters = 1000;      // hc_sinkhorn_iters
inline constexpr int64_t kMaxPositions = 1 << 24;   // max_position_embeddings, original_max_position_embeddings
inline constexpr int kMaxQuantBlock = 4096;         // quantization_config.weight_block_size entries
inline constexpr double kMaxScale = 1e6;            // routed_scaling_factor, swiglu_limit, YaRN factor and betas
inline constexpr double kMaxRopeTheta = 1e12;       // rope_theta, compress_rope_theta

}  // namespace dsa::model::bounds
