#include "dsa/core/cuda_memory.h"

#include "dsa/core/error.h"

#ifdef DSA_WITH_CUDA
#include <cuda_runtime.h>

#include "dsa/core/cuda_check.h"
#endif

namespace dsa::cuda_memory {

#ifdef DSA_WITH_CUDA
void* alloc(size_t nbytes, int device) {
  DSA_CUDA_CHECK(cudaSetDevice(device));
  void* p = nullptr;
  if (nbytes == 0) return nullptr;
  cudaError_t e = cudaMalloc(&p, nbytes);
  if (e != cudaSuccess)
    fail("cudaMalloc of {} bytes on cuda:{} failed: {}", nbytes, device, cudaGetErrorString(e));
  return p;
}
void free(void* p, int device) noexcept {
  if (!p) return;
  cudaSetDevice(device);
  cudaFree(p);
}
void copy(void* dst, const void* src, size_t n, Dir dir) {
  if (n == 0) return;
  cudaMemcpyKind k = dir == Dir::H2D ? cudaMemcpyHostToDevice
                     : dir == Dir::D2H ? cudaMemcpyDeviceToHost
                                       : cudaMemcpyDeviceToDevice;
  DSA_CUDA_CHECK(cudaMemcpy(dst, src, n, k));
}
void memset(void* p, int byte, size_t n) {
  if (n == 0) return;
  DSA_CUDA_CHECK(cudaMemset(p, byte, n));
}
#else
[[noreturn]] static void no_cuda() { fail("this dsa build has no CUDA support (configured with DSA_CUDA=OFF or no nvcc)"); }
void* alloc(size_t, int) { no_cuda(); }
void free(void*, int) noexcept {}
void copy(void*, const void*, size_t, Dir) { no_cuda(); }
void memset(void*, int, size_t) { no_cuda(); }
#endif

}  // namespace dsa::cuda_memory
