#include "dsa/attention/backends/cuda_sparse_mla.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "dsa/formats/kv_layout.h"

namespace dsa::attn {

std::string_view CudaSparseMlaBackend::description() const {
  return "portable CUDA sparse MLA decode (bf16 mma.sync, e4m3 dequantized in the kernel, <= 99 KB smem; SM89/SM90/SM100/SM120)";
}
std::vector<DType> CudaSparseMlaBackend::supported_dtypes() const { return {DType::BF16}; }
std::vector<KvCacheDtype> CudaSparseMlaBackend::supported_kv_cache_dtypes() const {
  return {KvCacheDtype::Fp8DsMla, KvCacheDtype::Fp8Model1};
}
PageSizeRule CudaSparseMlaBackend::supported_page_sizes() const { return PageSizeRule{1, 256, true}; }
std::vector<int> CudaSparseMlaBackend::supported_head_sizes() const { return {kv::ds_mla::kDim, kv::model1::kDim}; }
std::optional<std::vector<int>> CudaSparseMlaBackend::supported_head_counts() const {
  return std::vector<int>{16, 32, 64, 128};
}

bool CudaSparseMlaBackend::supports_capability(const Capability& c) const {
  // The e4m3 -> f16x2 conversion the kernel dequantizes with exists from sm_89 on; the kernel
  // avoids wgmma/tcgen05, so every later family runs it.
  return (c.major == 8 && c.minor == 9) || c.major == 9 || c.major == 10 || c.major == 12;
}
std::string CudaSparseMlaBackend::capability_requirement() const {
  return "8.9, 9.x, 10.x or 12.x: e4m3 conversions and mma.sync";
}

// Whether a cubin built for `arch` ("90a", "120f", "89") runs on capability `c`. No PTX is
// embedded, so there is no JIT fallback: "XYa" runs on exactly X.Y, "XYf" on major X with minor
// >= Y, plain "XY" SASS on major X with minor >= Y.
static bool image_runs_on(const std::string& arch, const Capability& c) {
  std::string digits = arch;
  char suffix = 0;
  if (!digits.empty() && (digits.back() == 'a' || digits.back() == 'f')) {
    suffix = digits.back();
    digits.pop_back();
  }
  if (digits.size() < 2 || digits.find_first_not_of("0123456789") != std::string::npos) return false;
  Capability a{std::stoi(digits.substr(0, digits.size() - 1)), digits.back() - '0'};
  if (suffix == 'a') return a == c;
  return a.major == c.major && a.minor <= c.minor;
}

std::optional<std::string> CudaSparseMlaBackend::supports_combination(const AttentionQuery& q) const {
  if (auto r = layout_head_size_mismatch(q)) return r;
  if (q.capability && q.build_cuda_archs && supports_capability(*q.capability)) {
    bool any = false;
    for (const auto& a : *q.build_cuda_archs) any = any || image_runs_on(a, *q.capability);
    if (!any)
      return fmt::format("this build has no kernel image for {} (built for {}): rebuild with DSA_CUDA_ARCHS including {}{}",
                         q.capability->sm(), fmt::join(*q.build_cuda_archs, ","), q.capability->value(),
                         q.capability->major >= 9 ? "a" : "");
  }
  return std::nullopt;
}

}  // namespace dsa::attn
