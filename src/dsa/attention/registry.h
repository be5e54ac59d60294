// The attention-backend registry. Registration is explicit (static libraries drop unreferenced
// objects, so no static initializers): call register_builtin_attention_backends() once at start-up
// (the CLI and the model runner do). Tests may build their own registries.
#pragma once
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "dsa/attention/backend.h"

namespace dsa::attn {

class AttentionBackendRegistry {
 public:
  // Takes ownership. Throws dsa::Error when a backend of the same name is already registered.
  void add(std::unique_ptr<AttentionBackend> backend);
  const AttentionBackend* find(std::string_view name) const;  // nullptr when unknown
  std::vector<const AttentionBackend*> all() const;            // registration order
  std::vector<std::string> names() const;                      // registration order
  bool empty() const { return backends_.empty(); }

 private:
  std::vector<std::unique_ptr<AttentionBackend>> backends_;
};

// The process-wide registry.
AttentionBackendRegistry& attention_backend_registry();

// Registers cpu_reference and cuda_sparse_mla into the process-wide registry. Idempotent and
// thread-safe.
void register_builtin_attention_backends();
// Same into `registry`, skipping names it already holds.
void register_builtin_attention_backends(AttentionBackendRegistry& registry);

}  // namespace dsa::attn
