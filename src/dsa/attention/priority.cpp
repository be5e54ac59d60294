#include "dsa/attention/priority.h"

#include <fmt/format.h>

#include "dsa/attention/backends/cpu_reference.h"
#include "dsa/attention/backends/cuda_sparse_mla.h"

namespace dsa::attn {

namespace {
const std::string kCpu{CpuReferenceBackend::kName};
const std::string kCudaPortable{CudaSparseMlaBackend::kName};
}  // namespace

const std::vector<PriorityRow>& attention_priority_table() {
  static const std::vector<PriorityRow> t = {
      {"cpu", {kCpu}},
      {"8.0", {kCudaPortable}},   // A100: rejected (no e4m3 conversions); listed so the error says why
      {"8.x", {kCudaPortable}},   // 8.6 rejected likewise, 8.9 (Ada) runs the portable kernel
      {"9.x", {kCudaPortable}},   // H100/H200
      {"10.x", {kCudaPortable}},  // B200/GB200
      {"12.0", {kCudaPortable}},  // RTX 50xx, RTX PRO 6000
      {"12.1", {kCudaPortable}},  // DGX Spark (GB10)
      {"12.x", {kCudaPortable}},
      {"cuda", {kCudaPortable}},  // any other capability
  };
  return t;
}

std::vector<std::string> attention_backend_priority(const std::optional<Capability>& cap) {
  const auto& t = attention_priority_table();
  auto row = [&](const std::string& key) -> const PriorityRow* {
    for (const auto& r : t)
      if (r.platform == key) return &r;
    return nullptr;
  };
  const PriorityRow* r = nullptr;
  if (!cap) {
    r = row("cpu");
  } else {
    r = row(cap->str());
    if (!r) r = row(fmt::format("{}.x", cap->major));
    if (!r) r = row("cuda");
  }
  return r ? r->backends : std::vector<std::string>{};
}

}  // namespace dsa::attn
