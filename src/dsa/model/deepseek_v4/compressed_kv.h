// The compressed branch of DeepSeek-V4 attention (CSA ratio 4, HCA ratio 128), batched over the
// requests of the step:
//   compress_into_cache: wkv(x) / wgate(x) (computed by the caller, with the layer's other
//     projections of x: LayerWeights::x_to_f32) through the compressor of every request at once
//     (windows persist in the requests' state slots across steps) and each emitted entry into the
//     layer's compressed KV cache (MODEL1, FP8 NoPE + bf16 rope) or, for the indexer's
//     compressor, its key cache (e4m3 + fp32 scale per 128 values).
//   indexer_select: the lightning indexer's top-k over each token's own request's keys, read from
//     the paged key cache -> global slots of the compressed cache ([T][index_topk], -1 = none).
//   hca_indices: every visible compressed entry -> global slots ([T][max visible]).
#pragma once
#include "dsa/attention/layer_spec.h"
#include "dsa/core/tensor.h"
#include "dsa/model/deepseek_v4/step.h"
#include "dsa/model/deepseek_v4/weights.h"

namespace dsa::model::v4 {

// kv, score: f32 [T][coff*head_dim], the compressor's wkv(x) and wgate(x) of the attn_norm
// output x. indexer = true feeds the indexer's compressor and writes the Indexer key format.
void compress_into_cache(const CompressorWeights& w, int ratio, int64_t head_dim, attn::CacheRole role, int layer,
                         const Step& s, const Tensor& kv, const Tensor& score, bool indexer);

// q_res: bf16 [T][q_lora] (query low-rank state after q_norm); weights: f32 [T][index_heads], the
// indexer's weights_proj(x). Returns i32 [T][index_topk].
Tensor indexer_select(const LayerWeights& w, int layer, const Step& s, const Tensor& q_res, const Tensor& weights);

// Returns i32 [T][K] (K = the most entries any token sees), or undefined when no token sees one.
Tensor hca_indices(int ratio, int layer, const Step& s);

}  // namespace dsa::model::v4
