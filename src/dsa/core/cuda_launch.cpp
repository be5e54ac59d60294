#include "dsa/core/cuda_launch.h"

#include "dsa/core/error.h"
#ifdef DSA_WITH_CUDA
#include <cuda_runtime.h>
#endif

namespace dsa::cuda_launch {

#ifdef DSA_WITH_CUDA
void set_device(int device) {
  const cudaError_t e = cudaSetDevice(device);
  if (e != cudaSuccess) fail("cudaSetDevice({}) failed: {}", device, cudaGetErrorString(e));
}

void check_launch(const char* kernel) {
  const cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) fail("launch of CUDA kernel {} failed: {}", kernel, cudaGetErrorString(e));
}

void check_status(int cuda_error, const char* what) {
  const auto e = static_cast<cudaError_t>(cuda_error);
  if (e != cudaSuccess) fail("{} failed: {}", what, cudaGetErrorString(e));
}
#else
void set_device(int device) { fail("set_device({}): this build has no CUDA", device); }
void check_launch(const char* kernel) { fail("check_launch({}): this build has no CUDA", kernel); }
void check_status(int cuda_error, const char* what) {
  if (cuda_error != 0) fail("{} failed: error {} (this build has no CUDA)", what, cuda_error);
}
#endif

void launch_error(const char* what) { throw Error(what); }

}  // namespace dsa::cuda_launch
