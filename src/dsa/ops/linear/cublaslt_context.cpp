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

}  // namespace dsa::ops::cublaslt
#endif
