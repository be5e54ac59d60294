#include "dsa/attention/backends/cuda_sparse_mla.h"

#include "dsa/formats/kv_layout.h"

namespace dsa::attn {

std::string_view CudaSparseMlaBackend::description() const {
  return "portable CUDA sparse MLA decode (mma.sync e4m3, <= 99 KB smem; SM89/SM90/SM100/SM120)";
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
  // e4m3 mma.sync (m16n8k32) exists from sm_89 on; the kernel avoids wgmma/tcgen05, so every
  // later family runs it.
  return (c.major == 8 && c.minor == 9) || c.major == 9 || c.major == 10 || c.major == 12;
}
std::string CudaSparseMlaBackend::capability_requirement() const {
  return "8.9, 9.x, 10.x or 12.x: e4m3 mma.sync";
}

std::optional<std::string> CudaSparseMlaBackend::supports_combination(const AttentionQuery& q) const {
  return layout_head_size_mismatch(q);
}

}  // namespace dsa::attn
