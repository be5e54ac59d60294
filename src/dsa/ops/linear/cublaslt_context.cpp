#include "dsa/ops/linear/cublaslt_context.h"

#ifdef DSA_WITH_CUDA
#include <cuda_runtime.h>

#include <map>
#include <mutex>

#include "dsa/core/cuda_check.h"
#include "dsa/core/cuda_stream.h"
#include "dsa/core/error.h"

namespace dsa::ops::cublaslt {

void check(cublasStatus_t status, const char* where, const char* expr) {
  if (status != CUBLAS_STATUS_SUCCESS) fail("cuBLASLt error {} in {}: {}", static_cast<int>(status), where, expr);
}

// One handle for the process (cuBLASLt calls may share it across threads) and one workspace per
// stream: streams that run at once (tensor-parallel ranks on their threads) must not share a
// workspace. A stream's workspace is allocated on the device current at its first call (an eager
// step: the first step of a shape never runs under capture) and kept for the process.
Context& context() {
  static const cublasLtHandle_t handle = [] {
    cublasLtHandle_t h = nullptr;
    DSA_CUBLASLT_CHECK("cuBLASLt set-up", cublasLtCreate(&h));
    return h;
  }();
  static std::mutex mu;
  static std::map<cudaStream_t, Context> per_stream;  // node-based: references stay valid
  const cudaStream_t stream = DSA_CURRENT_STREAM;
  std::lock_guard<std::mutex> lock(mu);
  auto it = per_stream.find(stream);
  if (it != per_stream.end()) return it->second;
  Context x;
  x.handle = handle;
  x.workspace_bytes = 32u << 20;
  DSA_CUDA_CHECK(cudaMalloc(&x.workspace, x.workspace_bytes));
  return per_stream.emplace(stream, x).first->second;
}

void choose_algo(Plan& p, const char* where) {
  cublasLtMatmulPreference_t pref;
  DSA_CUBLASLT_CHECK(where, cublasLtMatmulPreferenceCreate(&pref));
  size_t ws = context().workspace_bytes;
  DSA_CUBLASLT_CHECK(where,
                     cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws));
  cublasLtMatmulHeuristicResult_t res{};
  int n = 0;
  const cublasStatus_t st =
      cublasLtMatmulAlgoGetHeuristic(context().handle, p.op, p.a, p.b, p.d, p.d, pref, 1, &res, &n);
  cublasLtMatmulPreferenceDestroy(pref);
  p.ok = st == CUBLAS_STATUS_SUCCESS && n > 0;
  if (p.ok) p.algo = res.algo;
}

}  // namespace dsa::ops::cublaslt
#endif
