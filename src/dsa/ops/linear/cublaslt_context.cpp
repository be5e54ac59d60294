#include "dsa/ops/linear/cublaslt_context.h"

#ifdef DSA_WITH_CUDA
#include <cuda_runtime.h>

#include "dsa/core/cuda_check.h"
#include "dsa/core/error.h"

namespace dsa::ops::cublaslt {

void check(cublasStatus_t status, const char* where, const char* expr) {
  if (status != CUBLAS_STATUS_SUCCESS) fail("cuBLASLt error {} in {}: {}", static_cast<int>(status), where, expr);
}

const Context& context() {
  static const Context c = [] {
    Context x;
    x.workspace_bytes = 32u << 20;
    DSA_CUBLASLT_CHECK("cuBLASLt set-up", cublasLtCreate(&x.handle));
    DSA_CUDA_CHECK(cudaMalloc(&x.workspace, x.workspace_bytes));
    return x;
  }();
  return c;
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
