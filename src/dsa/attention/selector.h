// Attention-backend selection (docs/model-reference.md §7). Candidates come from the platform's
// priority list (priority.h); the first valid one wins and the others that are valid are
// reported too. A user-forced backend (`--attention-backend NAME` or DSA_ATTENTION_BACKEND) is
// validated alone. When nothing fits, the dsa::Error lists every candidate with its reasons:
//   No valid attention backend for cuda sm_120 with {dtype: bf16, ...}. Reasons:
//   {cuda_sparse_mla: [dsa built without CUDA]}
#pragma once
#include <string>
#include <vector>

#include "dsa/attention/backend.h"
#include "dsa/attention/registry.h"

namespace dsa::attn {

struct SelectOptions {
  std::string forced;                         // backend forced by the caller ("" = none)
  std::string forced_source = "--attention-backend";
  bool read_env = true;                       // when `forced` is empty, honour DSA_ATTENTION_BACKEND
  bool log = true;                            // log the choice and the other valid backends
  std::vector<std::string> candidates;        // replaces the platform's priority list when non-empty
};

struct Rejection {
  std::string backend;
  std::vector<std::string> reasons;
};

struct Selection {
  const AttentionBackend* backend = nullptr;           // nullptr: nothing fits (see error)
  std::vector<const AttentionBackend*> other_valid;    // valid candidates after the chosen one
  std::vector<Rejection> rejected;                     // invalid candidates, in priority order
  bool forced = false;
  std::string forced_source;                           // "--attention-backend" / "DSA_ATTENTION_BACKEND"
  std::string error;                                   // the full user-facing text when backend == nullptr
};

// DSA_ATTENTION_BACKEND when set and non-empty, else "".
std::string attention_backend_from_env();

// Evaluates every candidate; never throws for "nothing fits" (the text is in Selection::error).
// Throws dsa::Error for an unknown forced name (listing the known ones) or an empty registry.
Selection evaluate_attention_backends(const AttentionQuery& q, const SelectOptions& options = {},
                                      const AttentionBackendRegistry& registry = attention_backend_registry());

// As above, but throws dsa::Error with Selection::error when nothing fits.
Selection select_attention_backend(const AttentionQuery& q, const SelectOptions& options = {},
                                   const AttentionBackendRegistry& registry = attention_backend_registry());

}  // namespace dsa::attn
