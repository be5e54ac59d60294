// CUDA versions of the index conversions (sparse_index.h): one thread per output element (grid
// stride), an atomic increment of the row count per valid element (counts are zeroed first).
#include "dsa/core/pdl.cuh"
#include <cuda_runtime.h>

#include "dsa/core/cuda_launch.h"
#include "dsa/core/cuda_stream.h"

#include "dsa/ops/sparse_index/cuda/kernels.h"
#include "dsa/ops/sparse_index/slot_math.h"

namespace dsa::ops::sparse_index_cuda {
namespace {

__device__ __forceinline__ void emit(const Common& c, int64_t t, int64_t k, int32_t s) {
  c.slots[t * c.K + k] = s;
  if (c.counts && s >= 0) atomicAdd(c.counts + t, 1);
}

// Grid-stride over T*K elements: element (t, k) -> slot of local[t][k].
__global__ void topk_kernel(Common c, const int32_t* local) {
  pdl::entry();
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < c.T * c.K;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t t = e / c.K, k = e % c.K;
    emit(c, t, k, slot_math::local_to_slot(local[e], c.token_req[t], c.table, c.num_reqs, c.max_blocks, c.page_size,
                                           c.num_pages));
  }
}

// mode 0: HCA (entries [0, visible) with ratio), mode 1: sliding window of width K.
__global__ void position_kernel(Common c, const int32_t* positions, int mode, int ratio) {
  pdl::entry();
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < c.T * c.K;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t t = e / c.K, k = e % c.K;
    const int64_t pos = positions[t];
    int64_t first = 0, len = 0;
    if (mode == 0) {
      len = slot_math::visible_compressed(pos, ratio);
    } else if (pos >= 0) {
      first = slot_math::window_start(pos, static_cast<int>(c.K));
      len = pos - first + 1;
    }
    const int32_t s = k < len ? slot_math::local_to_slot(first + k, c.token_req[t], c.table, c.num_reqs, c.max_blocks,
                                                         c.page_size, c.num_pages)
                              : -1;
    emit(c, t, k, s);
  }
}

unsigned blocks_for(int64_t n) {
  int64_t b = (n + 255) / 256;
  return static_cast<unsigned>(b < 1 ? 1 : (b > 65535 ? 65535 : b));
}

void zero_counts(const Common& c, cudaStream_t s) {
  if (c.counts)
    cuda_launch::check_status(cudaMemsetAsync(c.counts, 0, c.T * sizeof(int32_t), s), "sparse_index: zeroing the counts");
}

}  // namespace

void launch_topk(const Common& c, const int32_t* local, void* stream) {
  auto s = DSA_STREAM_OR_CURRENT(stream);
  zero_counts(c, s);
  pdl::launch(topk_kernel, blocks_for(c.T * c.K), 256, 0, s, c, local);
  cuda_launch::check_launch("sparse_index topk_kernel");
}

void launch_positions(const Common& c, const int32_t* positions, int mode, int ratio, void* stream) {
  auto s = DSA_STREAM_OR_CURRENT(stream);
  zero_counts(c, s);
  pdl::launch(position_kernel, blocks_for(c.T * c.K), 256, 0, s, c, positions, mode, ratio);
  cuda_launch::check_launch("sparse_index position_kernel");
}

}  // namespace dsa::ops::sparse_index_cuda
