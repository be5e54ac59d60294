// Kernels of the contiguous MoE layout: counting + aligned offsets, row assignment, permutation
// and the weighted combine.
#include "dsa/core/pdl.cuh"
#include <cuda_bf16.h>

#include "dsa/ops/moe/cuda/block_scan.cuh"
#include "dsa/ops/moe/cuda/kernels.h"
#include "dsa/core/cuda_stream.h"

namespace dsa::ops::cuda {
namespace {

// Single CTA (1024 threads, E <= 1024): histogram of expert ids in shared memory, then the
// aligned exclusive scan as a block scan (thread e owns expert e; it was a one-thread serial loop
// over E with three global stores per expert, ~13 us), written to counts/offsets and to the
// cursor array that the assignment kernel advances with atomics. (The fused route + layout
// kernel, route_layout.cu, replaces this and the assignment for decode sizes.)
__global__ void __launch_bounds__(1024) layout_count_kernel(const int32_t* ids, int64_t n, int base, int E, int align,
                                                            int32_t* counts, int32_t* offsets, int32_t* cursor) {
  pdl::entry();
  __shared__ int32_t hist[1024];
  __shared__ int scratch[64];
  for (int e = threadIdx.x; e < E; e += blockDim.x) hist[e] = 0;
  __syncthreads();
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    const int32_t e = ids[i] - base;  // local id (expert parallelism: base > 0)
    if (e >= 0 && e < E) atomicAdd(&hist[e], 1);
  }
  __syncthreads();
  const int e = threadIdx.x;
  const int c = e < E ? hist[e] : 0;
  const int a = (c + align - 1) / align * align;
  int ea, ec, ta, tc;
  block_exclusive_scan2(a, c, scratch, ea, ec, ta, tc);
  if (e < E) {
    offsets[e] = ea;
    cursor[e] = ea;
    counts[e] = c;
  }
  if (e == 0) offsets[E] = ta;
}

// One thread per (token, slot): claims the next row of its expert. Launch: ceil(n/256) x 256.
__global__ void layout_assign_kernel(const int32_t* ids, int64_t n, int k, int base, int E, int32_t* cursor, int32_t* dst_row,
                                     int32_t* m_indices, int32_t* src_token) {
  pdl::entry();
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const int32_t e = ids[i] - base;
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
  pdl::entry();
  const int64_t r = blockIdx.x;
  const int32_t t = src_token[r];
  for (int64_t j = threadIdx.x; j < hv; j += blockDim.x)
    xp[r * hv + j] = (t >= 0 && t < T) ? x[t * hv + j] : make_uint4(0, 0, 0, 0);
}

// Eight consecutive bf16 values (one 16-byte load) widened to float, and eight floats rounded to
// bf16 in one 16-byte store: the combine kernels' column groups.
__device__ __forceinline__ void load_bf16x8(const __nv_bfloat16* p, float (&f)[8]) {
  const uint4 v = *reinterpret_cast<const uint4*>(p);
  const __nv_bfloat16* b = reinterpret_cast<const __nv_bfloat16*>(&v);
#pragma unroll
  for (int j = 0; j < 8; ++j) f[j] = __bfloat162float(b[j]);
}
__device__ __forceinline__ void store_bf16x8(__nv_bfloat16* p, const float (&f)[8]) {
  uint4 o;
  __nv_bfloat162* ob = reinterpret_cast<__nv_bfloat162*>(&o);
#pragma unroll
  for (int j = 0; j < 4; ++j) ob[j] = __floats2bfloat162_rn(f[2 * j], f[2 * j + 1]);
  *reinterpret_cast<uint4*>(p) = o;
}

// out[t] = shared[t] + sum_s w[t][s] * y[dst_row[t][s]] (fp32, slot order). CTA (t, chunk):
// 128 threads, one 8-column vector each (1024 columns per CTA), so T=1 with H=4096 runs on 4
// CTAs instead of 1 CTA with 2 serial column steps. The k rows and weights go to shared memory
// first, then every thread issues all its y loads before it adds (the older kernel waited for
// one row index and one y load per slot in turn). Same arithmetic in the same order as before
// (acc = shared; acc += w_s * y_s for s = 0..k-1), so the same bits. H % 8 == 0, k <= 32.
// Launch: (T, ceil(H / 1024)) x 128.
__global__ void __launch_bounds__(128) combine_kernel(const __nv_bfloat16* y, const int32_t* dst_row, const float* w,
                                                      const __nv_bfloat16* shared, __nv_bfloat16* out, int k, int64_t H,
                                                      int64_t rows_cap) {
  pdl::entry();
  __shared__ int32_t rows[32];
  __shared__ float ws[32];
  const int64_t t = blockIdx.x;
  if (threadIdx.x < k) {
    const int32_t r = dst_row[t * k + threadIdx.x];
    rows[threadIdx.x] = (r >= 0 && r < rows_cap) ? r : -1;
    ws[threadIdx.x] = w[t * k + threadIdx.x];
  }
  __syncthreads();
  const int64_t c = (static_cast<int64_t>(blockIdx.y) * blockDim.x + threadIdx.x) * 8;
  if (c >= H) return;
  float acc[8] = {};
  if (shared) load_bf16x8(shared + t * H + c, acc);
  for (int s0 = 0; s0 < k; s0 += 8) {
    uint4 v[8];
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      const int r = s0 + i < k ? rows[s0 + i] : -1;
      v[i] = r >= 0 ? *reinterpret_cast<const uint4*>(y + static_cast<int64_t>(r) * H + c) : make_uint4(0, 0, 0, 0);
    }
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      if (s0 + i >= k || rows[s0 + i] < 0) continue;
      const float wsi = ws[s0 + i];
      const __nv_bfloat16* b = reinterpret_cast<const __nv_bfloat16*>(&v[i]);
#pragma unroll
      for (int j = 0; j < 8; ++j) acc[j] += wsi * __bfloat162float(b[j]);
    }
  }
  store_bf16x8(out + t * H + c, acc);
}

// The older combine, kept for k > 32: one CTA per token, 8 consecutive columns per thread and
// step. Same arithmetic as combine_kernel. H % 8 == 0. Launch: T x 256.
__global__ void combine_any_k_kernel(const __nv_bfloat16* y, const int32_t* dst_row, const float* w, const __nv_bfloat16* shared,
                               __nv_bfloat16* out, int k, int64_t H, int64_t rows_cap) {
  pdl::entry();
  const int64_t t = blockIdx.x;
  for (int64_t c = threadIdx.x * 8; c < H; c += blockDim.x * 8) {
    float acc[8] = {};
    if (shared) load_bf16x8(shared + t * H + c, acc);
    for (int s = 0; s < k; ++s) {
      const int32_t r = dst_row[t * k + s];
      if (r < 0 || r >= rows_cap) continue;
      const float ws = w[t * k + s];
      float v[8];
      load_bf16x8(y + r * H + c, v);
#pragma unroll
      for (int j = 0; j < 8; ++j) acc[j] += ws * v[j];
    }
    store_bf16x8(out + t * H + c, acc);
  }
}

}  // namespace

void launch_layout(const int32_t* ids, int64_t n, int k, int base, int E, int align, int32_t* counts, int32_t* offsets,
                   int32_t* cursor, int32_t* dst_row, int32_t* m_indices, int32_t* src_token) {
  pdl::launch(layout_count_kernel, 1, 1024, 0, DSA_CURRENT_STREAM, ids, n, base, E, align, counts, offsets, cursor);
  if (n > 0)
    pdl::launch(layout_assign_kernel, static_cast<unsigned>((n + 255) / 256), 256, 0, DSA_CURRENT_STREAM, ids, n, k,
                base, E, cursor, dst_row, m_indices, src_token);
}

void launch_permute(const void* x, const int32_t* src_token, int64_t T, int64_t H, int64_t rows_cap, void* x_perm) {
  if (rows_cap == 0) return;
  pdl::launch(permute_kernel, static_cast<unsigned>(rows_cap), 128, 0, DSA_CURRENT_STREAM, static_cast<const uint4*>(x),
              src_token, T, H / 8, static_cast<uint4*>(x_perm));
}

void launch_combine(const void* y, const int32_t* dst_row, const float* w, const void* shared, void* out, int64_t T,
                    int k, int64_t H, int64_t rows_cap) {
  if (T == 0 || H == 0) return;
  const auto* yp = static_cast<const __nv_bfloat16*>(y);
  const auto* sp = static_cast<const __nv_bfloat16*>(shared);
  auto* op = static_cast<__nv_bfloat16*>(out);
  if (k > 32 || (H / 8 + 127) / 128 > 65535) {
    pdl::launch(combine_any_k_kernel, static_cast<unsigned>(T), 256, 0, DSA_CURRENT_STREAM, yp, dst_row, w, sp, op, k,
                H, rows_cap);
    return;
  }
  const dim3 grid(static_cast<unsigned>(T), static_cast<unsigned>((H / 8 + 127) / 128));
  pdl::launch(combine_kernel, grid, 128, 0, DSA_CURRENT_STREAM, yp, dst_row, w, sp, op, k, H, rows_cap);
}

}  // namespace dsa::ops::cuda
