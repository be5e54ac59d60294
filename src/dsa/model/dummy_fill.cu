// Device side of dummy_fill.h: the dummy weights are written where they live, so loading a
// ~160 GB model takes no host buffer and no PCIe transfer.
#include "dsa/core/pdl.cuh"
#include <cuda_runtime.h>

#include "dsa/core/cuda_stream.h"
#include "dsa/model/dummy_fill.h"

namespace dsa::model::dummy {
namespace {

// out[i] = fill_element(recipe, seed, i) for i in [0, n): one element per thread, grid-stride
// over a 1-D grid of 256-thread blocks (capped, so a multi-GB tensor loops instead of launching
// millions of blocks). Elements are bytes for the byte kinds, values otherwise (dummy_fill.h).
__global__ void dummy_fill_kernel(FillRecipe r, uint64_t seed, int64_t n, void* out) {
  pdl::entry();
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    fill_element(r, seed, i, out);
}

}  // namespace

void launch_dummy_fill(const FillRecipe& r, uint64_t seed, int64_t n, void* out) {
  if (n <= 0) return;
  constexpr int kThreads = 256;
  const int64_t blocks = (n + kThreads - 1) / kThreads;
  pdl::launch(dummy_fill_kernel, static_cast<unsigned>(blocks < 32768 ? blocks : 32768), kThreads, 0,
              DSA_CURRENT_STREAM, r, seed, n, out);
}

}  // namespace dsa::model::dummy
