// Kernels of the contiguous MoE layout: counting + aligned offsets, row assignment, permutation
// and the weighted combine.
#include <cuda_bf16.h>

#include "dsa/ops/moe/cuda/kernels.h"
#include "dsa/core/cuda_stream.h"

namespace dsa::ops::cuda {
namespace {

// Single CTA (1024 threads): histogram of expert ids in shared memory, then the aligned
// exclusive scan (one thread; E <= 1024), written to counts/offsets and to a cursor array that
// the assignment kernel advances with atomics.
__global__ void layout_count_kernel(const int32_t* ids, int64_t n, int E, int align, int32_t* counts, int32_t* offsets,
                                    int32_t* cursor) {
  __shared__ int32_t hist[1024];
  for (int e = threadIdx.x; e < E; e += blockDim.x) hist[e] = 0;
  __syncthreads();
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    const int32_t e = ids[i];
    if (e >= 0 && e < E) atomicAdd(&hist[e], 1);
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    int32_t off = 0;
    for (int e = 0; e < E; ++e) {
      offsets[e] = off;
      cursor[e] = off;
      counts[e] = hist[e];
      off += (hist[e] + align - 1) / align * align;
    }
    offsets[E] = off;
  }
}

// One thread per (token, slot): claims the next row of its expert. Launch: ceil(n/256) x 256.
__global__ void layout_assign_kernel(const int32_t* ids, int64_t n, int k, int E, int32_t* cursor, int32_t* dst_row,
                                     int32_t* m_indices, int32_t* src_token) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const int32_t e = ids[i];
  if (e < 0 || e >= E) {
    dst_row[i] = -1;
    return;
  }
  const int32_t r = atomicAdd(&cursor[e], 1);
  dst_row[i] = r;
  m_indices[r] = e;
  src_token[r] = static_cast<int32_t>(i / k);
}

// x_perm[r] = x[src_token[r]] (zeros for padding). One CTA per row, 16-byte vectors.
__global__ void permute_kernel(const uint4* x, const int32_t* src_token, int64_t T, int64_t hv, uint4* xp) {
  const int64_t r = blockIdx.x;
  const int32_t t = src_token[r];
  for (int64_t j = threadIdx.x; j < hv; j += blockDim.x)
    xp[r * hv + j] = (t >= 0 && t < T) ? x[t * hv + j] : make_uint4(0, 0, 0, 0);
}

// out[t] = shared[t] + sum_s w[t][s] * y[dst_row[t][s]] (fp32, slot order). One CTA per token;
// each thread handles 8 consecutive columns per step. H % 8 == 0.
__global__ void combine_kernel(const __nv_bfloat16* y, const int32_t* dst_row, const float* w, const __nv_bfloat16* shared,
                               __nv_bfloat16* out, int k, int64_t H, int64_t rows_cap) {
  const int64_t t = blockIdx.x;
  for (int64_t c = threadIdx.x * 8; c < H; c += blockDim.x * 8) {
    float acc[8];
    if (shared) {
      const uint4 v = *reinterpret_cast<const uint4*>(shared + t * H + c);
      const __nv_bfloat16* b = reinterpret_cast<const __nv_bfloat16*>(&v);
#pragma unroll
      for (int j = 0; j < 8; ++j) acc[j] = __bfloat162float(b[j]);
    } else {
#pragma unroll
      for (int j = 0; j < 8; ++j) acc[j] = 0.f;
    }
    for (int s = 0; s < k; ++s) {
      const int32_t r = dst_row[t * k + s];
      if (r < 0 || r >= rows_cap) continue;
      const float ws = w[t * k + s];
      const uint4 v = *reinterpret_cast<const uint4*>(y + r * H + c);
      const __nv_bfloat16* b = reinterpret_cast<const __nv_bfloat16*>(&v);
#pragma unroll
      for (int j = 0; j < 8; ++j) acc[j] += ws * __bfloat162float(b[j]);
    }
    uint4 o;
    __nv_bfloat162* ob = reinterpret_cast<__nv_bfloat162*>(&o);
#pragma unroll
    for (int j = 0; j < 4; ++j) ob[j] = __floats2bfloat162_rn(acc[2 * j], acc[2 * j + 1]);
    *reinterpret_cast<uint4*>(out + t * H + c) = o;
  }
}

}  // namespace

void launch_layout(const int32_t* ids, int64_t n, int k, int E, int align, int32_t* counts, int32_t* offsets,
                   int32_t* cursor, int32_t* dst_row, int32_t* m_indices, int32_t* src_token) {
  layout_count_kernel<<<1, 1024, 0, DSA_CURRENT_STREAM>>>(ids, n, E, align, counts, offsets, cursor);
  if (n > 0)
    layout_assign_kernel<<<static_cast<unsigned>((n + 255) / 256), 256, 0, DSA_CURRENT_STREAM>>>(ids, n, k, E, cursor, dst_row, m_indices,
                                                                          src_token);
}

void launch_permute(const void* x, const int32_t* src_token, int64_t T, int64_t H, int64_t rows_cap, void* x_perm) {
  if (rows_cap == 0) return;
  permute_kernel<<<static_cast<unsigned>(rows_cap), 128, 0, DSA_CURRENT_STREAM>>>(static_cast<const uint4*>(x), src_token, T, H / 8,
                                                           static_cast<uint4*>(x_perm));
}

void launch_combine(const void* y, const int32_t* dst_row, const float* w, const void* shared, void* out, int64_t T,
                    int k, int64_t H, int64_t rows_cap) {
  if (T == 0) return;
  combine_kernel<<<static_cast<unsigned>(T), 256, 0, DSA_CURRENT_STREAM>>>(static_cast<const __nv_bfloat16*>(y), dst_row, w,
                                                    static_cast<const __nv_bfloat16*>(shared),
                                                    static_cast<__nv_bfloat16*>(out), k, H, rows_cap);
}

}  // namespace dsa::ops::cuda
