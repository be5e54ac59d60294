// The GLM-5.1 attention block (docs/model-reference.md §3): MLA in absorbed form over the fp8_ds_mla
// latent cache, with the DSA indexer choosing each query's keys.
//
//   q_res  = RMSNorm(q_a_proj x)                          [T][q_lora]
//   q      = q_b_proj q_res -> [T][H][192 nope | 64 rope], RoPE on the rope part
//   kv     = kv_a_proj_with_mqa x -> [512 latent | 64 rope]; RMSNorm(latent); RoPE(rope)
//            -> inserted into the layer's latent cache at the tokens' slots
//   top-k  = indexer (full layers) or the previous full layer's choice (shared layers)
//   q_full = [W_UK_h q_nope_h (512) | q_rope_h (64)] per head, heads padded to a kernel count
//   o      = sparse MLA over the chosen slots, scale (192+64)^-0.5  -> [T][H][512 latent]
//   out    = o_proj(concat_h W_UV_h o_h)
// Indexer (transformers GlmMoeDsaIndexer): qi = wq_b q_res [T][hi][128], k = LayerNorm(wk x)
// (eps 1e-6), RoPE on the first 64 dims of both; score = sum_h w_h hi^-0.5 relu(qi_h.k 128^-0.5),
// w = weights_proj x; causal top-k.
#pragma once
#include <memory>

#include "dsa/attention/backend.h"
#include "dsa/model/glm5/step.h"
#include "dsa/model/glm5/weights.h"
#include "dsa/ops/rope/rope.h"

namespace dsa::model::glm5 {

struct AttentionConfig {
  int64_t heads = 0, heads_padded = 0;  // padded: the sparse kernel's head counts (16/32/64/128)
  int64_t qk_nope = 192, qk_rope = 64, v_head = 256, kv_lora = 512;
  int64_t index_heads = 0, index_dim = 128, index_topk = 2048;
  // q_a_layernorm / kv_a_layernorm: transformers 5.17 builds them as GlmMoeDsaRMSNorm(rank) with
  // the class default eps 1e-6 (not rms_norm_eps), as DeepSeek-V3's reference does.
  float lora_norm_eps = 1e-6f;
  float softmax_scale = 0.f;
  ops::RopeConfig rope;
  // Interleaved pairs for q, k and the indexer alike (docs/model-reference.md §3). Measured against the
  // golden files: half-split pairs in the indexer only, or everywhere, lose top-1 agreement
  // (7/24 and 4/24 prompt positions instead of 17/24 on the short prompt).
  ops::RopeParams rope_params;
};

// The indexer's per-token inputs (used by attention_block on "full" layers; public so that a test
// can feed it transformers' layer inputs): x bf16 [T][hidden] (input_layernorm output), q_res bf16
// [T][q_lora], positions i32|i64 [T] -> q bf16 [T][index_heads][index_dim] (RoPE applied),
// k f32 [T][index_dim] (LayerNorm, RoPE), weights f32 [T][index_heads] (raw weights_proj x).
// ops::indexer_topk(q, keys, weights, positions, IndexerParams::glm(...)) then scores and selects.
// wk_x: wk(x) when the caller has it (bf16 [T][index_dim], from the layer's fused projections);
// undefined: computed here.
struct IndexerInputs {
  Tensor q, k, weights;
};
IndexerInputs indexer_inputs(const IndexerWeights& w, const Tensor& x, const Tensor& q_res, const Tensor& positions,
                             const AttentionConfig& cfg, const Tensor& wk_x = {});

// x: bf16 [T][hidden] (input_layernorm output). Returns bf16 [T][hidden].
// cache: the layer's fp8_ds_mla latent pool (KV manager), addressed by step.slots / step.blocks.
Tensor attention_block(const LayerWeights& w, int layer, const Tensor& x, const AttentionConfig& cfg,
                       const attn::AttentionImpl& impl, const ops::PagedKvCache& cache, Step& step);

}  // namespace dsa::model::glm5
