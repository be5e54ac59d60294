// The cuBLASLt handle and workspace of every cuBLASLt call site (dense linear layers,
// head_matmul): one handle per process and one 32 MB workspace per stream (allocated on the
// device current at the stream's first call), so that streams running at once (tensor-parallel
// ranks, one thread and stream each) never share a workspace. Only with CUDA.
#pragma once
#ifdef DSA_WITH_CUDA
#include <cublasLt.h>

#include <cstddef>

#include "dsa/core/tensor.h"

namespace dsa::ops::cublaslt {

struct Context {
  cublasLtHandle_t handle = nullptr;
  void* workspace = nullptr;
  size_t workspace_bytes = 0;
};
// The handle and the current stream's workspace, created on first use (throws dsa::Error when
// cuBLASLt or the workspace allocation fails). Thread-safe.
Context& context();

// A matmul described for cuBLASLt (descriptor, A/B/D layouts) and the algorithm its heuristic
// chose; call sites cache one per problem shape.
struct Plan {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
  cublasLtMatmulAlgo_t algo{};
  bool ok = false;  // false: cuBLASLt has no algorithm for it
};
// Asks the heuristic for the best algorithm of p (D doubles as C) within the shared workspace;
// sets p.algo and p.ok.
void choose_algo(Plan& p, const char* where);

// Throws dsa::Error "cuBLASLt error <status> in <where>: <expr>" unless status is SUCCESS.
void check(cublasStatus_t status, const char* where, const char* expr);

}  // namespace dsa::ops::cublaslt

#define DSA_CUBLASLT_CHECK(where, expr) ::dsa::ops::cublaslt::check((expr), (where), #expr)
#endif
