// DeepSeek-V4 weights as the forward uses them: the validated checkpoint tensors (official names,
// checkpoint formats: FP8 block-scaled, MXFP4 experts, BF16/F32) grouped per layer, each copied
// once from the memory-mapped checkpoint to the model's device: the routed and shared experts
// straight into the [E][2I][...] gate/up layout the MoE GEMM reads (ops/moe/expert_gemm.h), so
// every weight is held once on the device. FP8 UE8M0 block scales are widened to f32 at load.
#pragma once
#include <string>
#include <vector>

#include "dsa/core/tensor.h"
#include "dsa/model/checkpoint_load.h"
#include "dsa/model/common/linear.h"
#include "dsa/model/config.h"
#include "dsa/model/deepseek_v4/sharding.h"
#include "dsa/ops/linear/linear.h"
#include "dsa/ops/moe/moe_layer.h"

namespace dsa::model::v4 {

struct CompressorWeights {
  Tensor ape;          // f32 [m][coff*d]
  Linear wkv, wgate;   // bf16 [coff*d][hidden] (views of LayerWeights::x_to_f32)
  Tensor norm;         // [d]
};

struct MhcWeights {
  Tensor fn, base, scale;  // f32 [(2+hc)*hc][hc*hidden], [(2+hc)*hc], [3]
};

struct LayerWeights {
  int ratio = 0;  // 0 sliding, 4 CSA, 128 HCA
  Tensor attn_norm, ffn_norm;
  MhcWeights hc_attn, hc_ffn;
  // attention
  Linear wq_a, wq_b, wkv, wo_b;
  Tensor q_norm, kv_norm, sink;  // sink f32 [H] (a rank's shard: its heads, sharding.h)
  Tensor wo_a;                   // bf16 [groups*o_lora][H*head_dim/groups] (a shard: its groups)
  CompressorWeights compressor;  // ratio != 0
  // indexer (ratio 4)
  Linear idx_wq_b;
  Linear idx_weights_proj;  // bf16 [index_heads][hidden] (a view of x_to_f32)
  CompressorWeights idx_compressor;
  // The projections of the attention input x, each set one weight (model/common/linear.h; the
  // named fields are views of its parts): wq_a, wkv (bf16 out); and in compressed layers the
  // compressor's wkv, wgate, then for CSA the indexer compressor's wkv, wgate and the indexer's
  // weights_proj (f32 out).
  FusedLinear x_to_bf16, x_to_f32;
  // MoE
  ops::MoeLayerWeights moe;
  int64_t expert_base = 0;  // expert parallelism: moe.w13 / w2 hold experts [base, base + their count)
};

// One MTP layer (`mtp.N.`, docs/speculative-decoding.md): x = e_proj(enorm(embed(next token)))
// broadcast over the hc streams + h_proj(hnorm(target streams)), then a full block (`block`,
// sliding-window attention), then its own hyper-head and norm before the shared LM head.
struct MtpWeights {
  LayerWeights block;
  Linear e_proj, h_proj;
  Tensor enorm, hnorm, norm;
  Tensor hc_head_fn, hc_head_base, hc_head_scale;
};

struct ModelWeights {
  Tensor embed;  // bf16 [V][hidden]
  Tensor head;   // bf16 [V][hidden]
  Tensor norm;   // [hidden]
  Tensor hc_head_fn, hc_head_base, hc_head_scale;
  std::vector<LayerWeights> layers;  // main layers
  std::vector<MtpWeights> mtp;       // the MTP layers (the drafter), when loaded
  LoadedWeights loaded;              // the checkpoint's tensors (memory-mapped views on the host)
};

// Groups the loaded (host) tensors of a DeepSeek-V4 checkpoint and copies them to `dev`; throws
// naming a missing tensor.
// `mtp`: the MTP layers too (ModelWeights::mtp stays empty otherwise). `tp`: only the split
// weights' parts of that rank go to `dev` (sharding.h), cut from the host tensors one at a time.
ModelWeights build_model_weights(LoadedWeights loaded, const ModelConfig& config, Device dev, bool mtp = false,
                                 const TpShard& tp = {});

}  // namespace dsa::model::v4
