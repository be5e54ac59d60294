#include "dsa/model/deepseek_v4/request_state.h"

#include "dsa/model/deepseek_v4/rope_config.h"

namespace dsa::model::v4 {

ops::CompressorConfig compressor_config(const ModelConfig& c, int ratio, int64_t head_dim) {
  ops::CompressorConfig cc = ops::CompressorConfig::v4(ratio, head_dim, static_cast<float>(c.rms_norm_eps));
  cc.rope = rope_config(c, ratio);
  return cc;
}

std::unique_ptr<V4RequestState> make_request_state(const ModelConfig& c, Device dev) {
  auto s = std::make_unique<V4RequestState>();
  s->layers.resize(static_cast<size_t>(c.num_layers));
  for (int l = 0; l < c.num_layers; ++l) {
    const int r = c.compress_ratios.at(l);
    if (r == 0) continue;
    s->layers[l].kv = ops::CompressorState::create(compressor_config(c, r, c.head_dim), dev);
    if (r == 4) s->layers[l].indexer = ops::CompressorState::create(compressor_config(c, r, c.index_head_dim), dev);
  }
  return s;
}

}  // namespace dsa::model::v4
