#include "dsa/ops/sparse_mla/random_cache.h"

#include <cmath>
#include <cstring>

#include "dsa/core/dtype_conv.h"
#include "dsa/formats/kv_layout.h"

namespace dsa::ops {

void fill_random_kv_pages(formats::KvFormat kind, int page, uint8_t* h, int64_t num_pages, RandomKvScales scales,
                          std::mt19937_64& gen, float* truth) {
  // A fresh distribution per draw (no cached second normal), so that every draw's place in the
  // stream depends only on the draws before it: the tests' seeded problems stay as they were.
  auto normal = [&] { return std::normal_distribution<float>(0.f, 1.f)(gen); };
  auto pow2_exponent = [&] { return static_cast<int>(std::uniform_int_distribution<int64_t>(-7, -4)(gen)); };
  auto code = [&](float scale) {
    uint8_t e = f32_to_e4m3(normal() / scale);
    if ((e & 0x7F) == 0x7F) e = static_cast<uint8_t>(e - 1);  // 0x7F / 0xFF are NaN
    return e;
  };
  auto put_rope = [&](uint8_t* dst, float* tr) {
    for (int i = 0; i < kv::ds_mla::kRope; ++i) {
      const uint16_t b = f32_to_bf16_bits(normal());
      std::memcpy(dst + 2 * i, &b, 2);
      if (tr) tr[i] = bf16_bits_to_f32(b);
    }
  };
  const int D = kv_cache_d_qk(kind);
  for (int64_t s = 0; s < num_pages * page; ++s) {
    float* tr = truth ? truth + s * D : nullptr;
    if (kind == formats::KvFormat::DsMla) {
      uint8_t* tok = h + kv::ds_mla::token_offset(s);
      for (int g = 0; g < kv::ds_mla::kGroups; ++g) {
        const float scale = scales == RandomKvScales::Fixed  ? 1.f / 16
                            : scales == RandomKvScales::Pow2 ? std::ldexp(1.f, pow2_exponent())
                                                             : std::uniform_real_distribution<float>(0.004f, 0.05f)(gen);
        std::memcpy(tok + kv::ds_mla::kScaleOffset + 4 * g, &scale, 4);
        for (int i = 0; i < kv::ds_mla::kGroup; ++i) {
          const int d = g * kv::ds_mla::kGroup + i;
          tok[d] = code(scale);
          if (tr) tr[d] = e4m3_to_f32(tok[d]) * scale;
        }
      }
      put_rope(tok + kv::ds_mla::kRopeOffset, tr ? tr + kv::ds_mla::kNope : nullptr);
    } else {
      uint8_t* tok = h + kv::model1::data_offset(s, page);
      uint8_t* sc = h + kv::model1::scale_offset(s, page);
      for (int g = 0; g < kv::model1::kGroups; ++g) {
        sc[g] = static_cast<uint8_t>(scales == RandomKvScales::Fixed ? 127 - 4 : 127 + pow2_exponent());
        const float scale = ue8m0_to_f32(sc[g]);
        for (int i = 0; i < kv::model1::kGroup; ++i) {
          const int d = g * kv::model1::kGroup + i;
          tok[d] = code(scale);
          if (tr) tr[d] = e4m3_to_f32(tok[d]) * scale;
        }
      }
      sc[kv::model1::kGroups] = 0xFF;  // the footer's pad byte: garbage every reader must ignore
      put_rope(tok + kv::model1::kRopeOffset, tr ? tr + kv::model1::kNope : nullptr);
    }
  }
}

}  // namespace dsa::ops
