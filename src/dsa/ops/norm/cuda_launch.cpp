#include "dsa/ops/norm/cuda_launch.h"

#include "dsa/core/error.h"
#ifdef DSA_WITH_CUDA
#include <cuda_runtime.h>
#endif

namespace dsa::ops::cuda {

#ifdef DSA_WITH_CUDA
void set_device(int device) {
  cudaError_t e = cudaSetDevice(device);
  if (e != cudaSuccess) fail("cudaSetDevice({}) failed: {}", device, cudaGetErrorString(e));
}

void check_launch(const char* kernel) {
  cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) fail("launch of CUDA kernel {} failed: {}", kernel, cudaGetErrorString(e));
}
#else
void set_device(int device) { fail("set_device({}): this build has no CUDA", device); }
void check_launch(const char* kernel) { fail("check_launch({}): this build has no CUDA", kernel); }
#endif

void launch_error(const char* what) { throw Error(what); }

}  // namespace dsa::ops::cuda
