// CUDA kernels of the small tensor ops (tensor_ops.h): strided dtype copy, residual add,
// embedding gather and the tiled per-head matrix product (head_matmul's decode GEMV lives in
// head_matmul_gemv.cu, its cuBLASLt route in head_matmul_cublaslt.cpp). Element access goes
// through ld/st (norm/cuda_elem.cuh): f32 or bf16 chosen by a runtime dtype that is uniform per
// launch, bf16 rounded to nearest even exactly like the CPU reference.
#include "dsa/core/pdl.cuh"
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
  pdl::entry();
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
  pdl::entry();
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    acc[i] += ld(x, xt, i);
}

// embed_rows: out[t][r][k] = table[ids[t]][k] for r < repeat. The grid covers (column block,
// token): a thread owns E consecutive columns k of one token (E = 8 when the table and out bases
// are 16-byte aligned and dim % 8 == 0, so a bf16 row chunk is one 16-byte load and an f32 one
// two; else E = 1), loads them once and writes them into every repeat (V4's hc streams) with
// 16-byte stores where vectorized. All loads of a thread are issued before its stores and no
// thread loops over columns, so a one-token call costs one memory round trip, not one per
// column step (the former one-CTA-per-token kernel walked a 4096 x 4 row in 64 dependent steps:
// 12-38 us for ONE token). Exact: bf16 -> f32 widens, f32 -> bf16 rounds like the CPU
// (f32_to_bf16_bits), same-dtype copies move bits. An id outside [0, vocab) yields a zero row:
// the table is never read out of bounds (the host checks ids first, so this only guards against
// a caller that skipped the check). Tokens beyond grid.y (65535) are walked by a y-stride loop.
// Launch: grid = (ceil(dim / (128 E)), min(tokens, 65535)), block = 128 (small blocks: more
// CTAs in flight for the few-token decode calls).
constexpr int kEmbedThreads = 128;

template <int E>
__global__ void __launch_bounds__(kEmbedThreads) embed_rows_kernel(EmbedRowsArgs a) {
  pdl::entry();
  const int64_t k0 = (int64_t(blockIdx.x) * kEmbedThreads + threadIdx.x) * E;
  if (k0 >= a.dim) return;
  for (int64_t t = blockIdx.y; t < a.tokens; t += gridDim.y) {
    const int32_t id = a.ids[t];
    const bool valid = id >= 0 && id < a.vocab;
    float v[E];
    const int64_t src = int64_t(valid ? id : 0) * a.dim + k0;
    if constexpr (E == 8) {
      if (!valid) {
#pragma unroll
        for (int j = 0; j < 8; ++j) v[j] = 0.f;
      } else if (a.table_dtype == DType::BF16) {
        const uint4 q = __ldg(reinterpret_cast<const uint4*>(static_cast<const uint16_t*>(a.table) + src));
        const uint32_t w[4] = {q.x, q.y, q.z, q.w};
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          v[2 * j] = __uint_as_float(w[j] << 16);
          v[2 * j + 1] = __uint_as_float(w[j] & 0xffff0000u);
        }
      } else {
        const float4* p = reinterpret_cast<const float4*>(static_cast<const float*>(a.table) + src);
        const float4 lo = __ldg(p), hi = __ldg(p + 1);
        v[0] = lo.x, v[1] = lo.y, v[2] = lo.z, v[3] = lo.w, v[4] = hi.x, v[5] = hi.y, v[6] = hi.z, v[7] = hi.w;
      }
      for (int64_t r = 0; r < a.repeat; ++r) {
        const int64_t dst = (t * a.repeat + r) * a.dim + k0;
        if (a.out_dtype == DType::BF16) {
          uint32_t w[4];
#pragma unroll
          for (int j = 0; j < 4; ++j)
            w[j] = uint32_t(f32_to_bf16_bits(v[2 * j])) | (uint32_t(f32_to_bf16_bits(v[2 * j + 1])) << 16);
          *reinterpret_cast<uint4*>(static_cast<uint16_t*>(a.out) + dst) = make_uint4(w[0], w[1], w[2], w[3]);
        } else {
          float4* p = reinterpret_cast<float4*>(static_cast<float*>(a.out) + dst);
          p[0] = make_float4(v[0], v[1], v[2], v[3]);
          p[1] = make_float4(v[4], v[5], v[6], v[7]);
        }
      }
    } else {
      v[0] = valid ? ld(a.table, a.table_dtype, src) : 0.f;
      for (int64_t r = 0; r < a.repeat; ++r) st(a.out, a.out_dtype, (t * a.repeat + r) * a.dim + k0, v[0]);
    }
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
  pdl::entry();
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

}  // namespace

void copy_cast(const CopyCastArgs& a) {
  const int64_t n = a.shape[0] * a.shape[1] * a.shape[2] * a.shape[3];
  if (n == 0) return;
  pdl::launch(copy_cast_kernel, static_cast<unsigned>(blocks_for(n)), kThreads, 0, DSA_CURRENT_STREAM, a, n);
  cuda_launch::check_launch("copy_cast_kernel");
}

void add_into(float* acc, const void* x, DType x_dtype, int64_t n) {
  if (n == 0) return;
  pdl::launch(add_into_kernel, static_cast<unsigned>(blocks_for(n)), kThreads, 0, DSA_CURRENT_STREAM, acc, x, x_dtype,
              n);
  cuda_launch::check_launch("add_into_kernel");
}

void embed_rows(const EmbedRowsArgs& a) {
  if (a.tokens == 0 || a.dim == 0 || a.repeat == 0) return;
  const bool vec = a.dim % 8 == 0 && reinterpret_cast<uintptr_t>(a.table) % 16 == 0 &&
                   reinterpret_cast<uintptr_t>(a.out) % 16 == 0;
  const int64_t per_block = int64_t(kEmbedThreads) * (vec ? 8 : 1);
  const int64_t gx = (a.dim + per_block - 1) / per_block;
  if (gx > 0x7fffffffLL) cuda_launch::launch_error("embed_rows: rows too long for one grid");
  const dim3 grid(static_cast<unsigned>(gx), static_cast<unsigned>(a.tokens < 65535 ? a.tokens : 65535));
  if (vec)
    pdl::launch(embed_rows_kernel<8>, grid, kEmbedThreads, 0, DSA_CURRENT_STREAM, a);
  else
    pdl::launch(embed_rows_kernel<1>, grid, kEmbedThreads, 0, DSA_CURRENT_STREAM, a);
  cuda_launch::check_launch("embed_rows_kernel");
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
    pdl::launch(head_matmul_kernel<16>, grid, kThreads, 0, DSA_CURRENT_STREAM, a);
  else
    pdl::launch(head_matmul_kernel<64>, grid, kThreads, 0, DSA_CURRENT_STREAM, a);
  cuda_launch::check_launch("head_matmul_kernel");
}

}  // namespace dsa::ops::cuda
