#include "dsa/attention/backends/cpu_reference.h"

#include "dsa/formats/kv_layout.h"

namespace dsa::attn {

std::string_view CpuReferenceBackend::description() const {
  return "plain CPU sparse MLA decode (reference; float accumulation)";
}
std::vector<DType> CpuReferenceBackend::supported_dtypes() const { return {DType::BF16}; }
std::vector<KvCacheDtype> CpuReferenceBackend::supported_kv_cache_dtypes() const {
  return {KvCacheDtype::Fp8DsMla, KvCacheDtype::Fp8Model1};
}
PageSizeRule CpuReferenceBackend::supported_page_sizes() const { return PageSizeRule{}; }  // any >= 1
std::vector<int> CpuReferenceBackend::supported_head_sizes() const { return {kv::ds_mla::kDim, kv::model1::kDim}; }
std::optional<std::string> CpuReferenceBackend::supports_combination(const AttentionQuery& q) const {
  return layout_head_size_mismatch(q);
}

}  // namespace dsa::attn
