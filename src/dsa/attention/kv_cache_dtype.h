// KV-cache dtype names a user can ask for (`--kv-cache-dtype`) and the concrete byte layouts
// behind them (src/dsa/formats/kv_layout.h, docs/kv-cache.md).
//
//   auto        the model's own FP8 layout (fp8_model1 for DeepSeek-V4, fp8_ds_mla for GLM-5.1)
//   fp8         alias of `auto` (the model's FP8 layout)
//   fp8_ds_mla  656 B/token: 512 e4m3 latent + 4 fp32 scales + 64 bf16 rope (GLM-5.1, V3.2); d_qk 576
//   fp8_model1  584 B/token: 448 e4m3 NoPE + 64 bf16 rope + 7 UE8M0 scales + pad (V4); d_qk 512
//   bf16        unquantized cache (a valid request, but no backend supports it yet)
#pragma once
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace dsa::attn {

enum class KvCacheDtype { Auto, Fp8, Fp8DsMla, Fp8Model1, Bf16 };

std::string_view kv_cache_dtype_name(KvCacheDtype d);
// Parses one of the names above. Throws dsa::Error listing the known names.
KvCacheDtype parse_kv_cache_dtype(std::string_view name);
const std::vector<KvCacheDtype>& all_kv_cache_dtypes();

// True for the names that stand for "the model's layout" (auto, fp8).
bool is_kv_cache_dtype_alias(KvCacheDtype d);

// The key width (d_qk) a concrete layout stores, nullopt for bf16 (any width) and aliases.
std::optional<int> kv_cache_dtype_head_size(KvCacheDtype d);

// Logical bytes of one cached token/entry of a concrete layout (bf16: 2 * head_size).
size_t kv_cache_dtype_token_bytes(KvCacheDtype d, int head_size);

}  // namespace dsa::attn
