// Error checking for CUDA runtime calls and kernel launches: failures become dsa::Error naming
// the call, the file and line, and CUDA's own message.
#pragma once
#include <cuda_runtime.h>

#include "dsa/core/error.h"

#define DSA_CUDA_CHECK(expr)                                                             \
  do {                                                                                   \
    cudaError_t dsa_err_ = (expr);                                                       \
    if (dsa_err_ != cudaSuccess)                                                         \
      ::dsa::fail("CUDA error at {}:{}: {} failed: {}", __FILE__, __LINE__, #expr,       \
                  cudaGetErrorString(dsa_err_));                                         \
  } while (0)

// After a <<<...>>> launch: catches bad launch configurations at once.
#define DSA_CUDA_CHECK_LAUNCH() DSA_CUDA_CHECK(cudaGetLastError())
