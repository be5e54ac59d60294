#include "dsa/attention/registry.h"

#include <mutex>

#include "dsa/attention/backends/cpu_reference.h"
#include "dsa/attention/backends/cuda_sparse_mla.h"
#include "dsa/core/error.h"

namespace dsa::attn {

void AttentionBackendRegistry::add(std::unique_ptr<AttentionBackend> backend) {
  DSA_CHECK(backend != nullptr, "AttentionBackendRegistry::add: null backend");
  DSA_CHECK(find(backend->name()) == nullptr, "attention backend '{}' is already registered", backend->name());
  backends_.push_back(std::move(backend));
}

const AttentionBackend* AttentionBackendRegistry::find(std::string_view name) const {
  for (const auto& b : backends_)
    if (b->name() == name) return b.get();
  return nullptr;
}

std::vector<const AttentionBackend*> AttentionBackendRegistry::all() const {
  std::vector<const AttentionBackend*> v;
  for (const auto& b : backends_) v.push_back(b.get());
  return v;
}

std::vector<std::string> AttentionBackendRegistry::names() const {
  std::vector<std::string> v;
  for (const auto& b : backends_) v.emplace_back(b->name());
  return v;
}

AttentionBackendRegistry& attention_backend_registry() {
  static AttentionBackendRegistry r;
  return r;
}

void register_builtin_attention_backends(AttentionBackendRegistry& r) {
  if (!r.find(CpuReferenceBackend::kName)) r.add(std::make_unique<CpuReferenceBackend>());
  if (!r.find(CudaSparseMlaBackend::kName)) r.add(std::make_unique<CudaSparseMlaBackend>());
}

void register_builtin_attention_backends() {
  static std::once_flag once;
  std::call_once(once, [] { register_builtin_attention_backends(attention_backend_registry()); });
}

}  // namespace dsa::attn
