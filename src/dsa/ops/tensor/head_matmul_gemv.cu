// The decode route of head_matmul (tensor_ops_cuda.h: head_matmul_gemv): out[t][h][n] =
// sum_k x[t][h][k] * w[h][n][k] for T <= 16 tokens with bf16 weights. At these T the product is a
// pure weight stream (V4-Flash wo_a: 8 groups x [1024][4096] = 64 MiB per layer; GLM W_UK + W_UV:
// ~29 MB per layer), so the kernel is a GEMV built to keep many 16-byte weight loads in flight
// and to need no shared memory at all: any K (K % 8 == 0) runs with the same code on sm_90a and
// sm_120a, no barriers, no K chunking.
#include "dsa/core/pdl.cuh"
#include <cstdint>

#include "dsa/core/cuda_launch.h"
#include "dsa/core/cuda_stream.h"
#include "dsa/ops/norm/cuda_elem.cuh"
#include "dsa/ops/tensor/tensor_ops_cuda.h"

namespace dsa::ops::cuda {
namespace {

constexpr int kThreads = 256;    // 8 warps
constexpr int kRows = 4;         // weight rows per warp
constexpr int kCtaRows = 8 * kRows;  // 32 outputs n per CTA: V4 wo_a gets 32 x 8 = 256 CTAs
// 32-lane k-steps whose weight loads a lane issues together: 2 (8 loads, 128 B in flight per
// lane); 1 at 16 tokens, where the 64 accumulators need the registers and the FMAs (512 per
// lane-step) hide the latency instead.
template <int TT>
constexpr int kUnroll = TT >= 16 ? 1 : 2;
// CTAs per SM the register cap is set for: 4 (<= 64 registers) at 1 token, 3 (<= 80) at 2, so
// that GLM's short-K grids of 512-1024 CTAs run in few waves; 2 (<= 128) above (no spills at
// these caps, ptxas -v for sm_90a).
template <int TT>
constexpr int kMinBlocks = TT == 1 ? 4 : TT == 2 ? 3 : 2;

// How x is read: 8 consecutive k per load group. Vector modes need a 16-byte aligned x row start
// for every (t, h) used; anything else (odd views, offsets) takes the scalar loads.
enum class XMode { Bf16Vec, F32Vec, Scalar };

// A 16-byte weight load that bypasses L1 (each weight byte is read exactly once; keeping L1 for
// the x rows, which every warp of the CTA re-reads).
__device__ __forceinline__ uint4 ld_stream16(const uint4* p) {
  uint4 v;
  asm("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
      : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
      : "l"(p));
  return v;
}

__device__ __forceinline__ float bf16_lo(uint32_t q) { return __uint_as_float(q << 16); }
__device__ __forceinline__ float bf16_hi(uint32_t q) { return __uint_as_float(q & 0xffff0000u); }

// x[off .. off + 8) as floats (off in elements; 16-byte aligned in the vector modes).
template <XMode M>
__device__ __forceinline__ void load_x8(const void* x, DType dt, int64_t off, float (&f)[8]) {
  if constexpr (M == XMode::Bf16Vec) {
    const uint4 q = __ldg(reinterpret_cast<const uint4*>(static_cast<const uint16_t*>(x) + off));
    f[0] = bf16_lo(q.x), f[1] = bf16_hi(q.x), f[2] = bf16_lo(q.y), f[3] = bf16_hi(q.y);
    f[4] = bf16_lo(q.z), f[5] = bf16_hi(q.z), f[6] = bf16_lo(q.w), f[7] = bf16_hi(q.w);
  } else if constexpr (M == XMode::F32Vec) {
    const float4* p = reinterpret_cast<const float4*>(static_cast<const float*>(x) + off);
    const float4 a = __ldg(p), b = __ldg(p + 1);
    f[0] = a.x, f[1] = a.y, f[2] = a.z, f[3] = a.w, f[4] = b.x, f[5] = b.y, f[6] = b.z, f[7] = b.w;
  } else {
#pragma unroll
    for (int j = 0; j < 8; ++j) f[j] = ld(x, dt, off + j);
  }
}

// s + sum_j x[j] * w[j] over the 8 bf16 of q, j in order (fmaf).
__device__ __forceinline__ float dot8(const float (&x)[8], const uint4 q, float s) {
  s = fmaf(x[0], bf16_lo(q.x), s);
  s = fmaf(x[1], bf16_hi(q.x), s);
  s = fmaf(x[2], bf16_lo(q.y), s);
  s = fmaf(x[3], bf16_hi(q.y), s);
  s = fmaf(x[4], bf16_lo(q.z), s);
  s = fmaf(x[5], bf16_hi(q.z), s);
  s = fmaf(x[6], bf16_lo(q.w), s);
  s = fmaf(x[7], bf16_hi(q.w), s);
  return s;
}

// head_matmul_gemv_kernel<TT, M>: TT >= tokens is the token count compiled in (1, 2, 4, 8, 16).
// A CTA owns 32 consecutive outputs n of ONE head h (grid.y): warp w takes rows n0 = 32 bx + 4 w
// .. n0 + 3. The K axis is cut into 16-byte chunks of 8 bf16 (chunk c = k in [8c, 8c + 8));
// lane l takes chunks l, l + 32, l + 64, ... of its 4 rows. Per loop trip a lane first issues
// the weight loads of 2 k-steps x 4 rows (8 independent 16-byte loads, 128 B in flight per lane,
// ~64 KB per SM at two CTAs; one k-step at TT = 16), then reads the matching x chunks of every token straight from
// global memory (__ldg: L1/L2 hits after the first warp, x is tiny next to the weights) and does
// the FMAs; each x chunk serves the 4 rows, each weight chunk the TT tokens. After the K loop a
// fixed xor-butterfly of shuffles reduces every (row, token) sum over the 32 lanes and one lane
// per sum stores it. No shared memory, no barriers (a warp past the last row simply returns).
// Rows >= N are never read; tokens >= T read no x and are not stored.
// Accuracy: float accumulation, each lane in increasing k, then the butterfly — a different
// order from the CPU's sequential sum, so both are within the usual gamma_K bound:
// |cuda - cpu| <= 2 K 2^-24 sum_k |x_k w_k| (+ the output's rounding; the tests use 8e-3 for bf16
// out and 1e-5 (1 + sqrt K) relative/absolute for f32 out).
// Launch: grid = (ceil(N / 32), H), block = 256, no shared memory; __launch_bounds__ caps the
// registers so that 4 (TT = 1), 3 (TT = 2) or 2 CTAs fit per SM on both archs (kMinBlocks).
template <int TT, XMode M>
__global__ void __launch_bounds__(kThreads, kMinBlocks<TT>) head_matmul_gemv_kernel(HeadMatmulArgs a) {
  pdl::entry();
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t h = blockIdx.y, chunks = a.k / 8;
  const int64_t n0 = int64_t(blockIdx.x) * kCtaRows + warp * kRows;
  const int64_t left = a.n - n0;
  if (left <= 0) return;
  const int rows = left < kRows ? static_cast<int>(left) : kRows;
  const int tokens = static_cast<int>(a.tokens);
  const uint4* w = reinterpret_cast<const uint4*>(static_cast<const uint16_t*>(a.w) + (h * a.n + n0) * a.k);
  const int64_t xh = h * a.x_stride_h;

  float acc[kRows][TT];
#pragma unroll
  for (int r = 0; r < kRows; ++r)
#pragma unroll
    for (int t = 0; t < TT; ++t) acc[r][t] = 0.f;

  constexpr int U = kUnroll<TT>;
  for (int64_t c0 = lane; c0 < chunks; c0 += 32 * U) {
    uint4 v[U][kRows];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int64_t c = c0 + 32 * u;
#pragma unroll
      for (int r = 0; r < kRows; ++r)
        v[u][r] = (c < chunks && r < rows) ? ld_stream16(w + r * chunks + c) : make_uint4(0, 0, 0, 0);
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int64_t c = c0 + 32 * u;
      if (c >= chunks) break;  // only the last trip of some lanes
#pragma unroll
      for (int t = 0; t < TT; ++t) {
        if (t >= tokens) break;
        float xf[8];
        load_x8<M>(a.x, a.x_dtype, t * a.x_stride_t + xh + c * 8, xf);
#pragma unroll
        for (int r = 0; r < kRows; ++r) acc[r][t] = dot8(xf, v[u][r], acc[r][t]);
      }
    }
  }

#pragma unroll
  for (int r = 0; r < kRows; ++r)
#pragma unroll
    for (int t = 0; t < TT; ++t) {
      float s = acc[r][t];
#pragma unroll
      for (int off = 16; off > 0; off >>= 1) s += __shfl_xor_sync(0xffffffffu, s, off);
      if (lane == ((r * TT + t) & 31) && t < tokens && r < rows)
        st(a.out, a.out_dtype, t * a.out_stride_t + h * a.out_stride_h + n0 + r, s);
    }
}

template <int TT, XMode M>
void launch(const HeadMatmulArgs& a) {
  const dim3 grid(static_cast<unsigned>((a.n + kCtaRows - 1) / kCtaRows), static_cast<unsigned>(a.heads));
  pdl::launch(head_matmul_gemv_kernel<TT, M>, grid, kThreads, 0, DSA_CURRENT_STREAM, a);
  cuda_launch::check_launch("head_matmul_gemv_kernel");
}

template <XMode M>
void launch_tokens(const HeadMatmulArgs& a) {
  if (a.tokens == 1)
    launch<1, M>(a);
  else if (a.tokens == 2)
    launch<2, M>(a);
  else if (a.tokens <= 4)
    launch<4, M>(a);
  else if (a.tokens <= 8)
    launch<8, M>(a);
  else
    launch<16, M>(a);
}

// Every x row start (t, h) used is 16-byte aligned when the base is and both strides (of the
// dims that have more than one index) are multiples of `per16` elements.
bool x_rows_aligned(const HeadMatmulArgs& a, int64_t per16) {
  return reinterpret_cast<uintptr_t>(a.x) % 16 == 0 && (a.tokens == 1 || a.x_stride_t % per16 == 0) &&
         (a.heads == 1 || a.x_stride_h % per16 == 0);
}

}  // namespace

bool head_matmul_gemv(const HeadMatmulArgs& a) {
  if (a.w_dtype != DType::BF16 || a.tokens < 1 || a.tokens > kHeadMatmulGemvMaxTokens || a.k < 8 || a.k % 8 != 0 ||
      a.n < 1 || reinterpret_cast<uintptr_t>(a.w) % 16 != 0 || a.heads < 1 || a.heads > 65535 ||
      (a.n + kCtaRows - 1) / kCtaRows > 0x7fffffffLL)
    return false;
  if (a.x_dtype == DType::BF16 && x_rows_aligned(a, 8))
    launch_tokens<XMode::Bf16Vec>(a);
  else if (a.x_dtype == DType::F32 && x_rows_aligned(a, 4))
    launch_tokens<XMode::F32Vec>(a);
  else
    launch_tokens<XMode::Scalar>(a);
  return true;
}

}  // namespace dsa::ops::cuda
