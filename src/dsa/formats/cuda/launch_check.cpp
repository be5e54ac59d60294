// See launch_check.h. Compiled in every build; the body exists only when CUDA is built.
#include "dsa/formats/cuda/launch_check.h"

#ifdef DSA_WITH_CUDA
#include <cuda_runtime.h>

#include "dsa/core/error.h"

namespace dsa::formats::cuda {

void set_device(int device) {
  cudaError_t e = cudaSetDevice(device);
  if (e != cudaSuccess) fail("cudaSetDevice({}) failed: {}", device, cudaGetErrorString(e));
}

void check_launch(const char* kernel_name) {
  cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) fail("CUDA launch of {} failed: {}", kernel_name, cudaGetErrorString(e));
}

void check_status(int cuda_error, const char* what) {
  auto e = static_cast<cudaError_t>(cuda_error);
  if (e != cudaSuccess) fail("{} failed: {}", what, cudaGetErrorString(e));
}

}  // namespace dsa::formats::cuda
#endif
