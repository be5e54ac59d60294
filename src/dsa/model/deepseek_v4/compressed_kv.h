// The compressed branch of DeepSeek-V4 attention (CSA ratio 4, HCA ratio 128), batched over the
// requests of the step:
//   compress_into_cache: wkv(x) / wgate(x) through the compressor of every request at once
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

// xb: bf16 [T][hidden] (attn_norm output). indexer = true feeds the indexer's compressor and
// writes the Indexer key format.
void compress_into_cache(const CompressorWeights& w, int ratio, int64_t head_dim, attn::CacheRole role, int layer,
                         const Step& s, const Tensor& xb, bool indexer);

// q_res: bf16 [T][q_lora] (query low-rank state after q_norm). Returns i32 [T][index_topk].
Tensor indexer_select(const LayerWeights& w, int layer, const Step& s, const Tensor& xb, const Tensor& q_res);

// Returns i32 [T][K] (K = the most entries any token sees), or undefined when no token sees one.
Tensor hca_indices(int ratio, int layer, const Step& s);

}  // namespace dsa::model::v4
