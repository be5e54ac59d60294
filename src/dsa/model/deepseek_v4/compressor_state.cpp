#include "dsa/model/deepseek_v4/compressor_state.h"

#include "dsa/model/deepseek_v4/rope_config.h"
#include "dsa/ops/compressor/compressor_batch.h"

namespace dsa::model::v4 {

ops::CompressorConfig compressor_config(const ModelConfig& c, int ratio, int64_t head_dim) {
  ops::CompressorConfig cc = ops::CompressorConfig::v4(ratio, head_dim, static_cast<float>(c.rms_norm_eps));
  cc.rope = rope_config(c, ratio);
  return cc;
}

std::vector<kv::StatePoolSpec> compressor_state_specs(const ModelConfig& c) {
  std::vector<kv::StatePoolSpec> specs;
  for (int l = 0; l < c.num_layers; ++l) {
    const int r = c.compress_ratios.at(l);
    if (r == 0) continue;
    specs.push_back({l, kCompressorState, ops::compressor_state_bytes(compressor_config(c, r, c.head_dim))});
    if (r == 4)
      specs.push_back({l, kIndexerCompressorState, ops::compressor_state_bytes(compressor_config(c, r, c.index_head_dim))});
  }
  return specs;
}

}  // namespace dsa::model::v4
