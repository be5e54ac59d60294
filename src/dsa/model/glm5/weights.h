// GLM-5 / GLM-5.1 weights as the forward uses them, built once from the validated checkpoint
// tensors (checkpoint_load.h, names of glm5/schema.h) and placed on the model's device.
//
// What is reshaped at load (and why):
//  - kv_b_proj [H*(192+256)][512] is split per head into the two absorbed matrices (docs/model-reference.md
//    §3): w_uk [H][512][192] (transposed: q_nope -> 512-d latent query) and
//    w_uv [H][256][512] (latent attention output -> v_head). Dequantized to f32, then kept in f32
//    (the CPU default: the reference path) or rounded once to bf16 (the CUDA default: half the
//    memory, 59 -> 29 MB per layer at 64 heads, and half the bytes each decode step reads).
//  - Routed experts experts.E.{gate,up,down}_proj are stacked into the grouped-GEMM layout of
//    ops/moe (w13 [E][2I][H] gate rows then up rows, w2 [E][H][I]; FP8 block scales alongside, or
//    bf16 as stored for BF16 checkpoints: WeightFormat::BF16, never quantized);
//    the shared expert and the dense MLP use the same layout with one "expert".
//  - F32 copies of weights that ops want in bf16 (weights_proj, lm_head) are rounded to bf16.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "dsa/core/tensor.h"
#include "dsa/model/checkpoint_load.h"
#include "dsa/model/common/linear.h"
#include "dsa/ops/linear/linear.h"
#include "dsa/ops/moe/moe_layer.h"

namespace dsa::model::glm5 {

struct IndexerWeights {
  Linear wq_b;         // [heads*128][q_lora]
  Linear wk;           // [128][hidden] (a view of LayerWeights::x_proj)
  Tensor k_norm_w, k_norm_b;  // [128]
  Tensor weights_proj;        // bf16 [heads][hidden]
};

struct LayerWeights {
  Tensor input_norm, post_attn_norm;  // [hidden]
  Linear q_a, q_b, kv_a, o_proj;
  // The projections of the layer input x as one weight (model/common/linear.h): q_a, the
  // indexer's wk on full layers, kv_a (q_a, wk and kv_a are views of its parts).
  FusedLinear x_proj;
  Tensor q_a_norm, kv_a_norm;
  Tensor w_uk;  // f32|bf16 [H][kv_lora][qk_nope]
  Tensor w_uv;  // f32|bf16 [H][v_head][kv_lora]
  bool has_indexer = false;  // indexer_types[l] == "full"
  IndexerWeights indexer;
  bool dense = false;
  ops::MoeLayerWeights moe;      // dense layers: shared_w13/shared_w2 hold the dense MLP
  int64_t expert_base = 0;       // expert parallelism: moe.w13 / w2 hold experts [base, base + their count)
};

// The MTP layer (`model.layers.{num_hidden_layers}.`, docs/speculative-decoding.md):
// x = eh_proj(concat(enorm(embed(next token)), hnorm(target hidden))), one full decoder layer
// (`layer`: indexer, MoE), then shared_head.norm and the main LM head (the release stores no
// separate head or embedding for it).
struct MtpWeights {
  LayerWeights layer;
  Tensor enorm, hnorm, shared_norm;  // [hidden]
  Linear eh_proj;                    // [hidden][2 * hidden] (bf16 in the release)
};

struct Weights {
  Tensor embed;     // [vocab][hidden] bf16 or f32, as in the checkpoint
  Tensor final_norm;
  Tensor lm_head;   // bf16 [vocab][hidden]
  std::vector<LayerWeights> layers;
  std::vector<MtpWeights> mtp;  // num_nextn_predict_layers
};

// Which part of the model a tensor-parallel rank builds (sharding.h has the plan): rank of
// size; ep = the routed experts split by expert instead of by intermediate slice.
struct Shard {
  int rank = 0, size = 1;
  bool ep = false;
  bool split() const { return size > 1; }
};

// Builds the forward's weights from loaded checkpoint tensors (on the CPU) and moves them to
// `device` (with `mtp`, the MTP layers too). FP8 and BF16 checkpoints both load; a stack mixing
// the two formats (e.g. an expert whose gate is FP8 and up BF16) throws dsa::Error naming the
// tensors. `absorbed`: dtype of w_uk / w_uv (f32 or bf16); unset = f32 on the CPU, bf16 on CUDA.
// `tp`: the rank's shard, cut from the host tensors before the copy to `device`, so the device
// only ever holds the shard; a size that does not divide a split dimension throws naming it.
Weights build_weights(const LoadedWeights& lw, const schema::Glm5Dims& d, Device device,
                      std::optional<DType> absorbed = std::nullopt, bool mtp = false, const Shard& tp = {});

}  // namespace dsa::model::glm5
