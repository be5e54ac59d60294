// cuda_sparse_mla: the portable CUDA sparse-MLA decode (bf16 mma.sync over keys dequantized
// from e4m3 with the sm_89+ cvt instructions, cp.async gathers, <= 99 KB shared memory per
// block), so one kernel family serves SM89, SM90, SM100 and SM120 (docs/kernels.md; docs/model-reference.md
// §10). The e4m3 conversions need sm_89+, hence no 8.0/8.6. The build must also carry a
// kernel image for the device (DSA_CUDA_ARCHS): arch-specific targets such as 90a/120a run only
// on exactly that capability.
// Contract: bf16 activations; fp8_ds_mla (d_qk 576) or fp8_model1 (d_qk 512); 16/32/64/128
// heads; kernel page sizes powers of two 1..256 (V4 uses 64 or 256 for the SWA cache, 64 for
// CSA compressed pages and 2 for HCA compressed pages); attention sink supported.
#pragma once
#include "dsa/attention/backend.h"

namespace dsa::attn {

class CudaSparseMlaBackend final : public AttentionBackend {
 public:
  static constexpr std::string_view kName = "cuda_sparse_mla";
  std::string_view name() const override { return kName; }
  std::string_view description() const override;
  bool runs_on_gpu() const override { return true; }
  std::vector<DType> supported_dtypes() const override;
  std::vector<KvCacheDtype> supported_kv_cache_dtypes() const override;
  PageSizeRule supported_page_sizes() const override;
  std::vector<int> supported_head_sizes() const override;
  std::optional<std::vector<int>> supported_head_counts() const override;
  bool is_mla() const override { return true; }
  bool is_sparse() const override { return true; }
  bool supports_sink() const override { return true; }
  bool supports_capability(const Capability& cap) const override;
  std::string capability_requirement() const override;
  std::optional<std::string> supports_combination(const AttentionQuery& q) const override;
};

}  // namespace dsa::attn
