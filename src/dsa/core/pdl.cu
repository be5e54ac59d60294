// pdl::enabled(): see pdl.cuh. The probe kernel is never launched; its attributes say which
// architecture the code that runs on this device was compiled for (all dsa kernels are built
// for the same DSA_CUDA_ARCHS, so the probe stands for all of them).
#include "dsa/core/pdl.cuh"

#include <atomic>
#include <cstdlib>
#include <cstring>

namespace dsa::pdl {
namespace {

__global__ void probe_kernel() { pdl::entry(); }  // never launched; kept to the contract

constexpr int kMaxDevices = 64;
std::atomic<int> device_state[kMaxDevices];  // 0 unknown, 1 off, 2 on

bool env_is(const char* name, const char* value) {
  const char* v = std::getenv(name);
  return v && std::strcmp(v, value) == 0;
}

bool env_allows() {
  static const bool allowed = env_is("DSA_PDL", "1");
  return allowed;
}

}  // namespace

bool enabled() {
  if (!env_allows()) return false;
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess || dev < 0 || dev >= kMaxDevices) return false;
  int s = device_state[dev].load(std::memory_order_relaxed);
  if (s == 0) {
    cudaFuncAttributes fa{};
    int major = 0;
    const bool ok = cudaFuncGetAttributes(&fa, probe_kernel) == cudaSuccess &&
                    cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) == cudaSuccess;
    if (!ok) (void)cudaGetLastError();  // a failed query is not a launch error of the next kernel
    s = ok && major >= 9 && fa.ptxVersion >= 90 && fa.binaryVersion >= 90 ? 2 : 1;
    device_state[dev].store(s, std::memory_order_relaxed);
  }
  return s == 2;
}

bool prefetch_weights() {
  static const bool allowed = !env_is("DSA_PDL_PREFETCH", "0");
  return allowed && enabled();
}

}  // namespace dsa::pdl
