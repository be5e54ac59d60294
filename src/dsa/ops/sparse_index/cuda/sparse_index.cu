// CUDA versions of the index conversions (sparse_index.h): one thread per output element, an
// atomic increment of the row count per valid element (counts are zeroed first).
#include <cuda_runtime.h>

#include "dsa/core/cuda_check.h"
#include "dsa/ops/sparse_index/slot_math.h"
#include "dsa/ops/sparse_index/sparse_index.h"

namespace dsa::ops::sparse_index_cuda {
namespace {

struct Common {
  const int32_t* token_req;
  const int32_t* table;
  int num_reqs, max_blocks, page_size;
  int64_t num_pages;
  int32_t* slots;
  int32_t* counts;  // may be null
  int64_t T, K;
};

__device__ __forceinline__ void emit(const Common& c, int64_t t, int64_t k, int32_t s) {
  c.slots[t * c.K + k] = s;
  if (c.counts && s >= 0) atomicAdd(c.counts + t, 1);
}

// Grid-stride over T*K elements: element (t, k) -> slot of local[t][k].
__global__ void topk_kernel(Common c, const int32_t* local) {
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < c.T * c.K;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t t = e / c.K, k = e % c.K;
    emit(c, t, k, slot_math::local_to_slot(local[e], c.token_req[t], c.table, c.num_reqs, c.max_blocks, c.page_size,
                                           c.num_pages));
  }
}

// mode 0: HCA (entries [0, visible) with ratio), mode 1: sliding window of width K.
__global__ void position_kernel(Common c, const int32_t* positions, int mode, int ratio) {
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

Common make_common(const Tensor& token_req, const BlockTable& b, const Tensor& slots, const Tensor& counts) {
  Common c{};
  c.token_req = token_req.data<int32_t>();
  c.table = b.table.data<int32_t>();
  c.num_reqs = static_cast<int>(b.table.size(0));
  c.max_blocks = static_cast<int>(b.table.size(1));
  c.page_size = b.page_size;
  c.num_pages = b.num_pages;
  c.slots = slots.data<int32_t>();
  c.counts = counts.defined() ? counts.data<int32_t>() : nullptr;
  c.T = slots.size(0);
  c.K = slots.size(1);
  return c;
}

unsigned blocks_for(int64_t n) {
  int64_t b = (n + 255) / 256;
  return static_cast<unsigned>(b < 1 ? 1 : (b > 65535 ? 65535 : b));
}

}  // namespace

void topk_to_slots(const TopkToSlotsParams& p) {
  DSA_CUDA_CHECK(cudaSetDevice(p.local.device().index));
  auto s = static_cast<cudaStream_t>(p.stream);
  Common c = make_common(p.token_req, p.blocks, p.slots, p.valid_counts);
  if (c.counts) DSA_CUDA_CHECK(cudaMemsetAsync(c.counts, 0, c.T * sizeof(int32_t), s));
  topk_kernel<<<blocks_for(c.T * c.K), 256, 0, s>>>(c, p.local.data<int32_t>());
  DSA_CUDA_CHECK_LAUNCH();
}

void hca_slots(const PositionSlotsParams& p, int ratio) {
  DSA_CUDA_CHECK(cudaSetDevice(p.positions.device().index));
  auto s = static_cast<cudaStream_t>(p.stream);
  Common c = make_common(p.token_req, p.blocks, p.slots, p.valid_counts);
  if (c.counts) DSA_CUDA_CHECK(cudaMemsetAsync(c.counts, 0, c.T * sizeof(int32_t), s));
  position_kernel<<<blocks_for(c.T * c.K), 256, 0, s>>>(c, p.positions.data<int32_t>(), 0, ratio);
  DSA_CUDA_CHECK_LAUNCH();
}

void swa_slots(const PositionSlotsParams& p) {
  DSA_CUDA_CHECK(cudaSetDevice(p.positions.device().index));
  auto s = static_cast<cudaStream_t>(p.stream);
  Common c = make_common(p.token_req, p.blocks, p.slots, p.valid_counts);
  if (c.counts) DSA_CUDA_CHECK(cudaMemsetAsync(c.counts, 0, c.T * sizeof(int32_t), s));
  position_kernel<<<blocks_for(c.T * c.K), 256, 0, s>>>(c, p.positions.data<int32_t>(), 1, 0);
  DSA_CUDA_CHECK_LAUNCH();
}

}  // namespace dsa::ops::sparse_index_cuda
