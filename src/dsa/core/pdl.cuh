// Programmatic dependent launch (PDL, SM90 and later): a kernel may be launched while the kernel
// before it on the stream is still running, so its launch latency and start-up overlap that
// kernel's tail. A decode step is a chain of ~30 small kernels per layer; each boundary otherwise
// costs the GPU a drain and a refill (a few microseconds at batch 1, also inside a CUDA graph).
//
// The contract, which every kernel launched through pdl::launch must keep:
//   * it calls pdl::entry() before its first global-memory access that depends on earlier work
//     on the stream (reads of inputs, and every write, since the kernel before may still read
//     what this one overwrites). entry() waits until every earlier kernel has completed and its
//     writes are visible (griddepcontrol.wait), then lets the next kernel launch
//     (griddepcontrol.launch_dependents), so at most one kernel runs ahead, parked at its own
//     entry() until this one completes;
//   * before entry() it may only read memory no kernel of the step writes (weights), e.g. to
//     prefetch it into L2.
// tests/core/test_pdl_contract.cpp checks by reading the sources that every __global__ kernel
// under src/dsa calls entry() (after at most some weight prefetches); run the CUDA tests with
// DSA_PDL=1 to exercise the overlapping launches.
//
// pdl::launch sets the launch attribute only where pdl::enabled() (DSA_PDL=1 and the device's
// code built for SM90 or later); otherwise it is a plain launch (entry()'s wait then returns at
// once, and below SM90 it compiles to nothing). Launch errors are left to cudaGetLastError
// (cuda_launch::check_launch).
#pragma once
#include <cuda_runtime.h>

#include <utility>

#include "dsa/core/pdl.h"

namespace dsa::pdl {

__device__ __forceinline__ void entry() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;\n\tgriddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// One L2 prefetch of the 128-byte line holding p (no register result, no wait): what a kernel may
// issue before entry() for memory that no earlier kernel of the step writes.
__device__ __forceinline__ void prefetch_l2(const void* p) {
  asm volatile("prefetch.global.L2 [%0];" ::"l"(p));
}

template <typename... Params, typename... Args>
inline void launch(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream, Args&&... args) {
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream;
  cfg.attrs = attr;
  cfg.numAttrs = enabled() ? 1 : 0;
  (void)cudaLaunchKernelEx(&cfg, kernel, std::forward<Args>(args)...);
}

}  // namespace dsa::pdl
