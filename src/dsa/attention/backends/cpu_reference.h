// cpu_reference: the plain CPU sparse-MLA attention (the oracle of every CUDA kernel and the path
// used where there is no GPU). CPU platform only; any head count and page size; d_qk 576
// (fp8_ds_mla) and 512 (fp8_model1); supports the V4 attention sink.
#pragma once
#include "dsa/attention/backend.h"

namespace dsa::attn {

class CpuReferenceBackend final : public AttentionBackend {
 public:
  static constexpr std::string_view kName = "cpu_reference";
  std::string_view name() const override { return kName; }
  std::string_view description() const override;
  bool runs_on_gpu() const override { return false; }
  std::vector<DType> supported_dtypes() const override;
  std::vector<KvCacheDtype> supported_kv_cache_dtypes() const override;
  PageSizeRule supported_page_sizes() const override;
  std::vector<int> supported_head_sizes() const override;
  bool is_mla() const override { return true; }
  bool is_sparse() const override { return true; }
  bool supports_sink() const override { return true; }
  bool supports_capability(const Capability&) const override { return false; }
  std::string capability_requirement() const override { return "the CPU platform (no GPU)"; }
  std::optional<std::string> supports_combination(const AttentionQuery& q) const override;
};

}  // namespace dsa::attn
