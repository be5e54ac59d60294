#include "dsa/model/deepseek_v4/rope_config.h"

namespace dsa::model::v4 {

ops::RopeConfig rope_config(const ModelConfig& c, int ratio) {
  const model::RopeConfig& src = ratio == 0 ? c.rope : c.compress_rope;
  ops::RopeConfig r;
  r.rope_dim = c.qk_rope_head_dim;
  r.theta = src.theta;
  if (src.type == "yarn") {
    r.yarn_factor = src.factor;
    r.original_max_position = src.original_max_position;
    r.beta_fast = src.beta_fast;
    r.beta_slow = src.beta_slow;
  }
  r.attention_factor = 1.0;  // V4 forces 1.0 (no mscale)
  r.validate();
  return r;
}

}  // namespace dsa::model::v4
