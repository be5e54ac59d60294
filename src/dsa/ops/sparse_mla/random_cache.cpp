#include "dsa/ops/sparse_mla/random_cache.h"

#include <cstring>

#include "dsa/core/dtype_conv.h"
#include "dsa/formats/kv_layout.h"

namespace dsa::ops {

void fill_random_kv_pages(KvCacheKind kind, int page, uint8_t* h, int64_t num_pages, std::mt19937_64& gen) {
  std::normal_distribution<float> nd;
  auto put_rope = [&](uint8_t* dst) {
    for (int i = 0; i < 64; ++i) {
      uint16_t b = f32_to_bf16_bits(nd(gen));
      std::memcpy(dst + 2 * i, &b, 2);
    }
  };
  for (int64_t s = 0; s < num_pages * page; ++s) {
    if (kind == KvCacheKind::Fp8DsMla) {
      uint8_t* tok = h + kv::ds_mla::token_offset(s);
      for (int d = 0; d < kv::ds_mla::kNope; ++d) tok[d] = f32_to_e4m3(nd(gen) * 16.f);
      for (int g = 0; g < kv::ds_mla::kGroups; ++g) {
        const float sc = 1.f / 16;
        std::memcpy(tok + kv::ds_mla::kScaleOffset + 4 * g, &sc, 4);
      }
      put_rope(tok + kv::ds_mla::kRopeOffset);
    } else {
      uint8_t* tok = h + kv::model1::data_offset(s, page);
      uint8_t* sc = h + kv::model1::scale_offset(s, page);
      for (int d = 0; d < kv::model1::kNope; ++d) tok[d] = f32_to_e4m3(nd(gen) * 16.f);
      for (int g = 0; g < kv::model1::kGroups; ++g) sc[g] = 123;
      put_rope(tok + kv::model1::kRopeOffset);
    }
  }
}

}  // namespace dsa::ops
