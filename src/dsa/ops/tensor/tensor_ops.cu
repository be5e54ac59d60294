// CUDA kernels of the small tensor ops (tensor_ops.h): strided dtype copy, residual add,
// embedding gather and the per-head matrix products of the absorbed MLA. Element access goes
// through ld/st (norm/cuda_elem.cuh): f32 or bf16 chosen by a runtime dtype that is uniform per
// launch, bf16 rounded to nearest even exactly like the CPU reference.
#include <cstdint>

#include "dsa/ops/norm/cuda_elem.cuh"
#include "dsa/core/cuda_launch.h"
#include "dsa/ops/tensor/tensor_ops_cuda.h"
#include "dsa/core/cuda_stream.h"

namespace dsa::ops::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = 1 << 20;  // grid-stride kernels: enough blocks to fill any GPU

int64_t blocks_for(int64_t n) {
  const int64_t b = (n + kThreads - 1) / kThreads;
  return b < kMaxBlocks ? b : kMaxBlocks;
}

// copy_cast: one thread per element (grid-stride loop over the flat row-major index of the
// 4-d shape). Each flat index is split into (i0, i1, i2, i3) and mapped through both stride
// sets, so any views work (slices, selects, transposed strides). Consecutive threads take
// consecutive i3, so contiguous last dims read and write coalesced.
// Launch: grid = min(ceil(n / 256), 2^20), block = 256.
__global__ void copy_cast_kernel(CopyCastArgs a, int64_t n) {
  const int64_t s1 = a.shape[1], s2 = a.shape[2], s3 = a.shape[3];
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    int64_t r = i;
    const int64_t i3 = r % s3;
    r /= s3;
    const int64_t i2 = r % s2;
    r /= s2;
    const int64_t i1 = r % s1;
    const int64_t i0 = r / s1;
    const int64_t so = i0 * a.src_stride[0] + i1 * a.src_stride[1] + i2 * a.src_stride[2] + i3 * a.src_stride[3];
    const int64_t d = i0 * a.dst_stride[0] + i1 * a.dst_stride[1] + i2 * a.dst_stride[2] + i3 * a.dst_stride[3];
    st(a.dst, a.dst_dtype, d, ld(a.src, a.src_dtype, so));
  }
}

// add_into: acc[i] += x[i], one thread per element (grid-stride), both contiguous.
// Launch: grid = min(ceil(n / 256), 2^20), block = 256.
__global__ void add_into_kernel(float* acc, const void* x, DType xt, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    acc[i] += ld(x, xt, i);
}

// embed_rows: one CTA per token; its threads stride over the row's columns, read the table
// element once and write it into every repeat (V4's hc streams). An id outside [0, vocab)
// yields a zero row: the table is never read out of bounds (the host checks ids first, so this
// only guards against a caller that skipped the check).
// Launch: grid = tokens, block = 256.
__global__ void embed_rows_kernel(EmbedRowsArgs a) {
  const int64_t t = blockIdx.x;
  const int32_t id = a.ids[t];
  const bool valid = id >= 0 && id < a.vocab;
  for (int64_t k = threadIdx.x; k < a.dim; k += blockDim.x) {
    const float v = valid ? ld(a.table, a.table_dtype, int64_t(id) * a.dim + k) : 0.f;
    for (int64_t r = 0; r < a.repeat; ++r) st(a.out, a.out_dtype, (t * a.repeat + r) * a.dim + k, v);
  }
}

// head_matmul: for each head h an independent GEMM out_h[T][N] = x_h[T][K] * w_h[N][K]^T (both
// operands K-contiguous). Classic shared-memory tiling: a CTA owns a tile of BM tokens x 64
// outputs of one head and walks K in steps of 32; each step stages the x tile [BM][32] and the
// weight tile [64][32] in shared memory as floats (loads run along K, so a warp reads one
// contiguous 64/128-byte run per row), stored K-major with one padding column so that both the
// transposing stores and the compute reads are free of bank conflicts. So every weight element
// fetched from global memory serves BM tokens. 256 threads as 16 x 16; thread (tx, ty) keeps
// (BM/16) x 4 accumulators for tokens ty + 16i and outputs tx + 16j (consecutive threads write
// consecutive n: coalesced stores). K is summed in order 0..K-1 with fmaf in float, like the CPU
// reference up to fused rounding. BM = 16 for decode-sized T (the weight read dominates; fewer
// wasted token rows), 64 for prefill. Zero-filled tails make any T, N, K valid.
// Launch: grid = (ceil(T / BM), ceil(N / 64), H), block = 256; shared (32 * (BM + 1) + 32 * 65) * 4 B.
// Measured on the H200 (2026-11-30, bf16, H = 64): T = 1: 30 us for W_UK [512][192], 50 us for
// W_UV [256][512] (0.3-0.4 TB/s of weights: a decode-specific kernel with vectorized weight loads
// could get close to 10x faster); T = 2048: ~18 TFLOP/s (prefill goes to cuBLASLt instead:
// 66-68 us, 390-500 TFLOP/s).
constexpr int kBN = 64, kBK = 32;

template <int BM>
__global__ void __launch_bounds__(kThreads) head_matmul_kernel(HeadMatmulArgs a) {
  constexpr int RM = BM / 16, RN = kBN / 16;
  __shared__ float xs[kBK][BM + 1];
  __shared__ float ws[kBK][kBN + 1];
  const int64_t m0 = int64_t(blockIdx.x) * BM, n0 = int64_t(blockIdx.y) * kBN, h = blockIdx.z;
  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
  const int64_t w_head = h * a.n * a.k;
  float acc[RM][RN];
#pragma unroll
  for (int i = 0; i < RM; ++i)
#pragma unroll
    for (int j = 0; j < RN; ++j) acc[i][j] = 0.f;

  for (int64_t k0 = 0; k0 < a.k; k0 += kBK) {
    for (int i = threadIdx.x; i < BM * kBK; i += kThreads) {
      const int mm = i / kBK, kk = i % kBK;
      const int64_t t = m0 + mm, kg = k0 + kk;
      xs[kk][mm] = (t < a.tokens && kg < a.k) ? ld(a.x, a.x_dtype, t * a.x_stride_t + h * a.x_stride_h + kg) : 0.f;
    }
    for (int i = threadIdx.x; i < kBN * kBK; i += kThreads) {
      const int nn = i / kBK, kk = i % kBK;
      const int64_t ng = n0 + nn, kg = k0 + kk;
      ws[kk][nn] = (ng < a.n && kg < a.k) ? ld(a.w, a.w_dtype, w_head + ng * a.k + kg) : 0.f;
    }
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < kBK; ++kk) {
      float xv[RM], wv[RN];
#pragma unroll
      for (int i = 0; i < RM; ++i) xv[i] = xs[kk][ty + 16 * i];
#pragma unroll
      for (int j = 0; j < RN; ++j) wv[j] = ws[kk][tx + 16 * j];
#pragma unroll
      for (int i = 0; i < RM; ++i)
#pragma unroll
        for (int j = 0; j < RN; ++j) acc[i][j] = fmaf(xv[i], wv[j], acc[i][j]);
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < RM; ++i) {
    const int64_t t = m0 + ty + 16 * i;
    if (t >= a.tokens) continue;
#pragma unroll
    for (int j = 0; j < RN; ++j) {
      const int64_t n = n0 + tx + 16 * j;
      if (n < a.n) st(a.out, a.out_dtype, t * a.out_stride_t + h * a.out_stride_h + n, acc[i][j]);
    }
  }
}

// head_matmul_gemv: decode-sized head_matmul (T <= 8 tokens) with bf16 weights, K % 8 == 0. At
// these T the product is a weight stream (GLM W_UK + W_UV: ~29 MB per layer at 64 heads), so
// the shape is a GEMV: a CTA owns 32 consecutive outputs n of ONE head h (8 warps x 4 rows);
// the head's x rows [T][K] are staged once in shared memory as floats; each warp streams its 4
// weight rows with 16-byte loads (lane l takes k-chunks l, l+32, ... of 8 values), all 4 rows'
// loads issued before the FMAs so that several requests are in flight per lane; every x chunk
// read from shared memory serves the 4 rows. Warp shuffles reduce each (row, token) sum; lane 0
// stores. Float accumulation (in a different order than the CPU: the tests use a tolerance).
// Launch: grid = (ceil(N / 32), H), block = 256, dynamic shared TT * K * 4 bytes (<= 32 KB).
constexpr int kGemvRows = 4;  // weight rows per warp

template <int TT>
__global__ void __launch_bounds__(kThreads) head_matmul_gemv_kernel(HeadMatmulArgs a) {
  extern __shared__ float xs[];  // [TT][K]
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t h = blockIdx.y, k = a.k, chunks = k / 8;
  for (int64_t i = threadIdx.x; i < TT * k; i += kThreads) {
    const int64_t t = i / k, kk = i % k;
    xs[i] = t < a.tokens ? ld(a.x, a.x_dtype, t * a.x_stride_t + h * a.x_stride_h + kk) : 0.f;
  }
  __syncthreads();
  const int64_t n0 = int64_t(blockIdx.x) * (8 * kGemvRows) + warp * kGemvRows;
  const uint4* w = reinterpret_cast<const uint4*>(static_cast<const uint16_t*>(a.w) + (h * a.n) * k);
  float acc[kGemvRows][TT];
#pragma unroll
  for (int r = 0; r < kGemvRows; ++r)
#pragma unroll
    for (int t = 0; t < TT; ++t) acc[r][t] = 0.f;
  for (int64_t c = lane; c < chunks; c += 32) {
    uint4 v[kGemvRows];
#pragma unroll
    for (int r = 0; r < kGemvRows; ++r)
      v[r] = n0 + r < a.n ? __ldg(w + (n0 + r) * chunks + c) : make_uint4(0, 0, 0, 0);
#pragma unroll
    for (int t = 0; t < TT; ++t) {
      const float4 x0 = *reinterpret_cast<const float4*>(xs + t * k + c * 8);
      const float4 x1 = *reinterpret_cast<const float4*>(xs + t * k + c * 8 + 4);
#pragma unroll
      for (int r = 0; r < kGemvRows; ++r) {
        const uint32_t q[4] = {v[r].x, v[r].y, v[r].z, v[r].w};
        float s = acc[r][t];
        s = fmaf(x0.x, __uint_as_float(q[0] << 16), s);
        s = fmaf(x0.y, __uint_as_float(q[0] & 0xffff0000u), s);
        s = fmaf(x0.z, __uint_as_float(q[1] << 16), s);
        s = fmaf(x0.w, __uint_as_float(q[1] & 0xffff0000u), s);
        s = fmaf(x1.x, __uint_as_float(q[2] << 16), s);
        s = fmaf(x1.y, __uint_as_float(q[2] & 0xffff0000u), s);
        s = fmaf(x1.z, __uint_as_float(q[3] << 16), s);
        s = fmaf(x1.w, __uint_as_float(q[3] & 0xffff0000u), s);
        acc[r][t] = s;
      }
    }
  }
#pragma unroll
  for (int r = 0; r < kGemvRows; ++r)
#pragma unroll
    for (int t = 0; t < TT; ++t) {
      float s = acc[r][t];
#pragma unroll
      for (int off = 16; off > 0; off >>= 1) s += __shfl_xor_sync(0xffffffffu, s, off);
      if (lane == 0 && t < a.tokens && n0 + r < a.n)
        st(a.out, a.out_dtype, t * a.out_stride_t + h * a.out_stride_h + n0 + r, s);
    }
}

template <int TT>
void launch_gemv(const HeadMatmulArgs& a) {
  const size_t smem = static_cast<size_t>(TT) * static_cast<size_t>(a.k) * sizeof(float);
  const dim3 grid(static_cast<unsigned>((a.n + 8 * kGemvRows - 1) / (8 * kGemvRows)), static_cast<unsigned>(a.heads));
  head_matmul_gemv_kernel<TT><<<grid, kThreads, smem, DSA_CURRENT_STREAM>>>(a);
  cuda_launch::check_launch("head_matmul_gemv_kernel");
}

}  // namespace

void copy_cast(const CopyCastArgs& a) {
  const int64_t n = a.shape[0] * a.shape[1] * a.shape[2] * a.shape[3];
  if (n == 0) return;
  copy_cast_kernel<<<static_cast<unsigned>(blocks_for(n)), kThreads, 0, DSA_CURRENT_STREAM>>>(a, n);
  cuda_launch::check_launch("copy_cast_kernel");
}

void add_into(float* acc, const void* x, DType x_dtype, int64_t n) {
  if (n == 0) return;
  add_into_kernel<<<static_cast<unsigned>(blocks_for(n)), kThreads, 0, DSA_CURRENT_STREAM>>>(acc, x, x_dtype, n);
  cuda_launch::check_launch("add_into_kernel");
}

void embed_rows(const EmbedRowsArgs& a) {
  if (a.tokens == 0 || a.dim == 0 || a.repeat == 0) return;
  if (a.tokens > 0x7fffffffLL) cuda_launch::launch_error("embed_rows: too many tokens for one grid");
  embed_rows_kernel<<<static_cast<unsigned>(a.tokens), kThreads, 0, DSA_CURRENT_STREAM>>>(a);
  cuda_launch::check_launch("embed_rows_kernel");
}

bool head_matmul_gemv(const HeadMatmulArgs& a) {
  if (a.w_dtype != DType::BF16 || a.tokens < 1 || a.tokens > 8 || a.k % 8 != 0 || a.k * 8 > 8192 ||
      reinterpret_cast<uintptr_t>(a.w) % 16 != 0 || a.heads > 65535 || (a.n + 31) / 32 > 0x7fffffffLL)
    return false;
  if (a.tokens == 1)
    launch_gemv<1>(a);
  else if (a.tokens == 2)
    launch_gemv<2>(a);
  else if (a.tokens <= 4)
    launch_gemv<4>(a);
  else
    launch_gemv<8>(a);
  return true;
}

void head_matmul(const HeadMatmulArgs& a) {
  if (a.tokens == 0 || a.heads == 0 || a.n == 0) return;
  const int bm = a.tokens <= 16 ? 16 : 64;
  const int64_t gx = (a.tokens + bm - 1) / bm, gy = (a.n + kBN - 1) / kBN;
  if (gx > 0x7fffffffLL || gy > 65535 || a.heads > 65535)
    cuda_launch::launch_error(
        "head_matmul: tokens, outputs or heads exceed the grid limits (2^31 - 1, 65535 * 64, 65535)");
  const dim3 grid(static_cast<unsigned>(gx), static_cast<unsigned>(gy), static_cast<unsigned>(a.heads));
  if (bm == 16)
    head_matmul_kernel<16><<<grid, kThreads, 0, DSA_CURRENT_STREAM>>>(a);
  else
    head_matmul_kernel<64><<<grid, kThreads, 0, DSA_CURRENT_STREAM>>>(a);
  cuda_launch::check_launch("head_matmul_kernel");
}

}  // namespace dsa::ops::cuda
