// CPU reference of sparse_mla_decode: plain loops, fp32 dequantization (exactly the values the
// formats define) and double accumulation. This is the oracle the CUDA kernels are tested
// against; it favours clarity over speed.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "dsa/core/dtype_conv.h"
#include "dsa/formats/kv_layout.h"
#include "dsa/ops/sparse_mla/sparse_mla.h"

namespace dsa::ops {
namespace {

// Dequantizes the d_qk values of one cache slot into `out` (float, exact per the format).
void dequant_row(const PagedKvCache& c, int64_t slot, float* out) {
  const uint8_t* base = c.data.data<uint8_t>();
  if (c.kind == formats::KvFormat::DsMla) {
    const uint8_t* tok = base + kv::ds_mla::token_offset(slot);
    for (int g = 0; g < kv::ds_mla::kGroups; ++g) {
      float scale;
      std::memcpy(&scale, tok + kv::ds_mla::kScaleOffset + 4 * g, 4);
      for (int i = 0; i < kv::ds_mla::kGroup; ++i) {
        int d = g * kv::ds_mla::kGroup + i;
        out[d] = e4m3_to_f32(tok[d]) * scale;
      }
    }
    for (int i = 0; i < kv::ds_mla::kRope; ++i) {
      uint16_t b;
      std::memcpy(&b, tok + kv::ds_mla::kRopeOffset + 2 * i, 2);
      out[kv::ds_mla::kNope + i] = bf16_bits_to_f32(b);
    }
  } else {
    const uint8_t* tok = base + kv::model1::data_offset(slot, c.page_size);
    const uint8_t* sc = base + kv::model1::scale_offset(slot, c.page_size);
    for (int d = 0; d < kv::model1::kNope; ++d) out[d] = e4m3_to_f32(tok[d]) * ue8m0_to_f32(sc[d / kv::model1::kGroup]);
    for (int i = 0; i < kv::model1::kRope; ++i) {
      uint16_t b;
      std::memcpy(&b, tok + kv::model1::kRopeOffset + 2 * i, 2);
      out[kv::model1::kNope + i] = bf16_bits_to_f32(b);
    }
  }
}

// Appends the usable slots of token t's list (see sparse_mla.h for the rules).
void collect(const SparseKeyList& l, int64_t t, std::vector<std::pair<const PagedKvCache*, int64_t>>& keys) {
  const int64_t K = l.indices.size(1);
  int64_t n = K;
  if (l.lengths.defined()) n = std::min<int64_t>(std::max<int64_t>(l.lengths.data<int32_t>()[t], 0), K);
  const int32_t* idx = l.indices.data<int32_t>() + t * K;
  const int64_t slots = l.cache.num_slots();
  for (int64_t p = 0; p < n; ++p)
    if (idx[p] >= 0 && idx[p] < slots) keys.emplace_back(&l.cache, idx[p]);
}

}  // namespace

void sparse_mla_reference(const SparseMlaParams& p) {
  p.validate();
  DSA_CHECK(!p.q.device().is_cuda(), "sparse_mla_reference: tensors must be on the CPU (q is on {})",
            p.q.device().str());
  const int64_t T = p.tokens();
  const int H = p.heads(), D = p.d_qk();
  const uint16_t* q = p.q.data<uint16_t>();
  uint16_t* o = p.o.data<uint16_t>();
  float* lse = p.lse.data<float>();
  const float* sink = p.sink.defined() ? p.sink.data<float>() : nullptr;

  std::vector<std::pair<const PagedKvCache*, int64_t>> keys;
  std::vector<float> kv;  // [n][D] dequantized rows of this token
  std::vector<double> s;
  for (int64_t t = 0; t < T; ++t) {
    keys.clear();
    collect(p.main, t, keys);
    if (p.extra) collect(*p.extra, t, keys);
    const size_t n = keys.size();
    kv.resize(n * D);
    for (size_t j = 0; j < n; ++j) dequant_row(*keys[j].first, keys[j].second, kv.data() + j * D);
    s.resize(n);
    for (int h = 0; h < H; ++h) {
      const uint16_t* qh = q + (t * H + h) * D;
      uint16_t* oh = o + (t * H + h) * kSparseMlaDv;
      if (n == 0) {
        for (int d = 0; d < kSparseMlaDv; ++d) oh[d] = 0;
        lse[t * H + h] = -std::numeric_limits<float>::infinity();
        continue;
      }
      double m = -std::numeric_limits<double>::infinity();
      for (size_t j = 0; j < n; ++j) {
        double acc = 0;
        for (int d = 0; d < D; ++d) acc += static_cast<double>(bf16_bits_to_f32(qh[d])) * kv[j * D + d];
        s[j] = acc * p.softmax_scale;
        m = std::max(m, s[j]);
      }
      double l = 0;
      for (size_t j = 0; j < n; ++j) l += std::exp(s[j] - m);
      const double denom = l + (sink ? std::exp(static_cast<double>(sink[h]) - m) : 0.0);
      std::vector<double> acc(kSparseMlaDv, 0.0);
      for (size_t j = 0; j < n; ++j) {
        const double w = std::exp(s[j] - m);
        for (int d = 0; d < kSparseMlaDv; ++d) acc[d] += w * kv[j * D + d];
      }
      for (int d = 0; d < kSparseMlaDv; ++d) oh[d] = f32_to_bf16_bits(static_cast<float>(acc[d] / denom));
      lse[t * H + h] = static_cast<float>(m + std::log(l));
    }
  }
}

}  // namespace dsa::ops
