#include "dsa/attention/kv_cache_dtype.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "dsa/core/error.h"
#include "dsa/formats/kv_layout.h"

namespace dsa::attn {

std::string_view kv_cache_dtype_name(KvCacheDtype d) {
  switch (d) {
    case KvCacheDtype::Auto: return "auto";
    case KvCacheDtype::Fp8: return "fp8";
    case KvCacheDtype::Fp8DsMla: return "fp8_ds_mla";
    case KvCacheDtype::Fp8Model1: return "fp8_model1";
    case KvCacheDtype::Bf16: return "bf16";
  }
  return "?";
}

const std::vector<KvCacheDtype>& all_kv_cache_dtypes() {
  static const std::vector<KvCacheDtype> v = {KvCacheDtype::Auto, KvCacheDtype::Fp8, KvCacheDtype::Fp8DsMla,
                                              KvCacheDtype::Fp8Model1, KvCacheDtype::Bf16};
  return v;
}

KvCacheDtype parse_kv_cache_dtype(std::string_view name) {
  std::vector<std::string_view> known;
  for (KvCacheDtype d : all_kv_cache_dtypes()) {
    if (kv_cache_dtype_name(d) == name) return d;
    known.push_back(kv_cache_dtype_name(d));
  }
  fail("unknown kv-cache dtype '{}' (known: {})", name, fmt::join(known, ", "));
}

bool is_kv_cache_dtype_alias(KvCacheDtype d) { return d == KvCacheDtype::Auto || d == KvCacheDtype::Fp8; }

std::optional<int> kv_cache_dtype_head_size(KvCacheDtype d) {
  switch (d) {
    case KvCacheDtype::Fp8DsMla: return kv::ds_mla::kDim;
    case KvCacheDtype::Fp8Model1: return kv::model1::kDim;
    default: return std::nullopt;
  }
}

size_t kv_cache_dtype_token_bytes(KvCacheDtype d, int head_size) {
  switch (d) {
    case KvCacheDtype::Fp8DsMla: return kv::ds_mla::kTokenBytes;
    case KvCacheDtype::Fp8Model1: return kv::model1::kLogicalBytes;
    case KvCacheDtype::Bf16: return static_cast<size_t>(head_size) * 2;
    default: fail("kv-cache dtype '{}' is an alias: resolve it against the model first", kv_cache_dtype_name(d));
  }
}

}  // namespace dsa::attn
