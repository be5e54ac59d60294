// RMSNorm / LayerNorm over rows (norm.h). Two kernels, one CTA per row in both (rows stay
// independent and every reduction has a fixed shape, so results are deterministic):
//
// row_norm_reg_kernel<U> (rows of at most kRegMaxCols = 16384 columns, the decode case): the row
//   is held in registers. Thread t owns the 4-column groups t, t + blockDim, ..., (U of them):
//   it issues all its loads of x (and of weight/bias) before any arithmetic (16-byte f32 /
//   8-byte bf16 accesses when aligned), so a row costs one memory round trip instead of one per
//   strided loop iteration; one block reduction for the mean square (LayerNorm: one for the mean,
//   then one for the centred square from the same registers), then the writes. Block =
//   ceil(groups / U) rounded up to a warp (<= 512: up to 128 registers a thread, no spills),
//   U = 1, 2, 4 or 8 by row length.
// row_norm_kernel (longer rows, the fallback): threads stride over the columns; pass 1 (LayerNorm
//   only) sums x, pass 2 sums (x - mean)^2, pass 3 writes; the row is re-read from L1/L2.
//
// add_rms_norm (a.delta set, x f32): both kernels first add delta to x in float and store the sum
//   back to x (each thread the columns it owns), then normalise those sums as above: the same
//   float add as add_into and the same norm over the same values, so the pair's result bit for
//   bit, one launch and one read of x fewer.
//
// Both compute in float: inv = 1 / sqrtf(sum((x - mean)^2) / n + eps), out = (x - mean) * inv
// [* w] [+ b], rounded once to out's dtype. Against the CPU reference (double statistics) the
// difference is float summation-order rounding: |err| <= ~1e-6 relative for f32 out, one bf16
// ulp (8e-3 relative) for bf16 out, the bounds the tests check. Each thread writes only elements
// it read itself, after every reduction (block_sum ends in a barrier), so out == x is safe.
#include "dsa/core/pdl.cuh"
#include "dsa/ops/norm/cuda_vec4.cuh"
#include "dsa/core/cuda_launch.h"
#include "dsa/ops/norm/norm_cuda.h"
#include "dsa/core/cuda_stream.h"

namespace dsa::ops::cuda {
namespace {

__device__ __forceinline__ int64_t esz(DType t) { return t == DType::BF16 ? 2 : 4; }

template <int U>
__global__ void __launch_bounds__(512) row_norm_reg_kernel(RowNormArgs a, bool vec) {
  pdl::entry();
  __shared__ float scratch[32];
  const int64_t r = blockIdx.x;
  const char* xr = static_cast<const char*>(a.x) + r * a.x_row_stride * esz(a.x_dtype);
  char* orow = static_cast<char*>(a.out) + r * a.out_row_stride * esz(a.out_dtype);
  const int64_t n = a.cols;
  F4 x[U], w[U], b[U], d[U];
#pragma unroll
  for (int u = 0; u < U; ++u) {
    const int64_t i = 4 * (threadIdx.x + static_cast<int64_t>(u) * blockDim.x);
    const bool in = i < n;
    x[u] = in ? ld4(xr, a.x_dtype, i, n, vec) : F4{};
    if (a.delta) d[u] = in ? ld4(static_cast<const char*>(a.delta) + r * n * esz(a.delta_dtype), a.delta_dtype, i, n, vec) : F4{};
    if (a.weight) w[u] = in ? ld4(a.weight, a.weight_dtype, i, n, vec) : F4{};
    if (a.bias) b[u] = in ? ld4(a.bias, a.bias_dtype, i, n, vec) : F4{};
  }
  if (a.delta) {  // the residual add (f32 x): the same float add as add_into, the sums written back
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int64_t i = 4 * (threadIdx.x + static_cast<int64_t>(u) * blockDim.x);
      if (i >= n) continue;
#pragma unroll
      for (int e = 0; e < 4; ++e) x[u].v[e] += d[u].v[e];
      st4(const_cast<char*>(xr), DType::F32, i, n, vec, x[u]);
    }
  }
  const float nf = static_cast<float>(n);
  float mean = 0.f;
  if (a.layer_norm) {
    float s = 0.f;
#pragma unroll
    for (int u = 0; u < U; ++u) s += (x[u].v[0] + x[u].v[1]) + (x[u].v[2] + x[u].v[3]);
    mean = block_sum(s, scratch) / nf;
  }
  float ss = 0.f;
#pragma unroll
  for (int u = 0; u < U; ++u) {
    const int64_t i = 4 * (threadIdx.x + static_cast<int64_t>(u) * blockDim.x);
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const float v = i + e < n ? x[u].v[e] - mean : 0.f;  // padding must not add mean^2
      ss = fmaf(v, v, ss);
    }
  }
  const float inv = 1.0f / sqrtf(block_sum(ss, scratch) / nf + a.eps);
#pragma unroll
  for (int u = 0; u < U; ++u) {
    const int64_t i = 4 * (threadIdx.x + static_cast<int64_t>(u) * blockDim.x);
    if (i >= n) continue;
    F4 o;
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      float v = (x[u].v[e] - mean) * inv;
      if (a.weight) v *= w[u].v[e];
      if (a.bias) v += b[u].v[e];
      o.v[e] = v;
    }
    st4(orow, a.out_dtype, i, n, vec, o);
  }
}

__global__ void row_norm_kernel(RowNormArgs a) {
  pdl::entry();
  __shared__ float scratch[32];
  const int64_t r = blockIdx.x;
  const char* xr = static_cast<const char*>(a.x) + r * a.x_row_stride * esz(a.x_dtype);
  char* orow = static_cast<char*>(a.out) + r * a.out_row_stride * esz(a.out_dtype);
  const float n = static_cast<float>(a.cols);
  if (a.delta) {  // x += delta, written back; later passes re-read only the columns this thread wrote
    const char* dr = static_cast<const char*>(a.delta) + r * a.cols * esz(a.delta_dtype);
    float* xw = reinterpret_cast<float*>(const_cast<char*>(xr));
    for (int64_t i = threadIdx.x; i < a.cols; i += blockDim.x) xw[i] += ld(dr, a.delta_dtype, i);
  }
  float mean = 0.f;
  if (a.layer_norm) {
    float s = 0.f;
    for (int64_t i = threadIdx.x; i < a.cols; i += blockDim.x) s += ld(xr, a.x_dtype, i);
    mean = block_sum(s, scratch) / n;
  }
  float ss = 0.f;
  for (int64_t i = threadIdx.x; i < a.cols; i += blockDim.x) {
    const float v = ld(xr, a.x_dtype, i) - mean;
    ss += v * v;
  }
  const float inv = 1.0f / sqrtf(block_sum(ss, scratch) / n + a.eps);
  for (int64_t i = threadIdx.x; i < a.cols; i += blockDim.x) {
    float v = (ld(xr, a.x_dtype, i) - mean) * inv;
    if (a.weight) v *= ld(a.weight, a.weight_dtype, i);
    if (a.bias) v += ld(a.bias, a.bias_dtype, i);
    st(orow, a.out_dtype, i, v);
  }
}

}  // namespace

int row_norm_reg_groups_per_thread(int64_t cols) {
  const int64_t groups = (cols + 3) / 4;
  if (cols > kRegMaxCols) return 0;
  return groups <= 256 ? 1 : groups <= 1024 ? 2 : groups <= 2048 ? 4 : 8;
}

void row_norm(const RowNormArgs& a) {
  if (a.rows == 0) return;
  if (a.rows > 0x7fffffffLL) cuda_launch::launch_error("row_norm: too many rows for one grid");
  const unsigned grid = static_cast<unsigned>(a.rows);
  if (const int U = row_norm_reg_groups_per_thread(a.cols); U > 0) {
    const int64_t groups = (a.cols + 3) / 4;
    const int threads = static_cast<int>(((groups + U - 1) / U + 31) / 32 * 32);
    const bool vec = vec4_ok(a.x, a.x_dtype, a.cols, a.x_row_stride) &&
                     vec4_ok(a.out, a.out_dtype, a.cols, a.out_row_stride) &&
                     vec4_ok(a.weight, a.weight_dtype, a.cols, 0) && vec4_ok(a.bias, a.bias_dtype, a.cols, 0) &&
                     vec4_ok(a.delta, a.delta_dtype, a.cols, a.cols);
    if (U == 1)
      pdl::launch(row_norm_reg_kernel<1>, grid, threads, 0, DSA_CURRENT_STREAM, a, vec);
    else if (U == 2)
      pdl::launch(row_norm_reg_kernel<2>, grid, threads, 0, DSA_CURRENT_STREAM, a, vec);
    else if (U == 4)
      pdl::launch(row_norm_reg_kernel<4>, grid, threads, 0, DSA_CURRENT_STREAM, a, vec);
    else
      pdl::launch(row_norm_reg_kernel<8>, grid, threads, 0, DSA_CURRENT_STREAM, a, vec);
    cuda_launch::check_launch("row_norm_reg_kernel");
    return;
  }
  const int threads = a.cols >= 4096 ? 512 : a.cols >= 1024 ? 256 : a.cols >= 256 ? 128 : 64;
  pdl::launch(row_norm_kernel, grid, threads, 0, DSA_CURRENT_STREAM, a);
  cuda_launch::check_launch("row_norm_kernel");
}

}  // namespace dsa::ops::cuda
