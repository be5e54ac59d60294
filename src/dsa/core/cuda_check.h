// Error checking for CUDA runtime calls in host code: a failure becomes dsa::Error naming the call,
// the file and line, and CUDA's own message. Kernel launches are checked with
// cuda_launch::check_launch (cuda_launch.h), which .cu files can call too.
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
