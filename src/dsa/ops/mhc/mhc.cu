// mHC kernels (mhc.h). Three launches, all deterministic (fixed reduction order, no atomics):
//
// mix_kernel: grid (T, n_mix), 256 threads. CTA (t, r) computes dot(fn[r], x_t) and sum(x_t^2)
//   over the hc*d flattened streams (f32 streams: 16-byte loads, four in flight per thread) and
//   writes mix[t][r] = dot * rsqrt(mean(x^2) + norm_eps).
//   Splitting the 24 fn rows over CTAs gives T*24 CTAs, so even a single decode token streams fn
//   (24 x 4d fp32 = 1.5 MB for V4-Flash) with 24 SMs instead of one; x_t (32 KB bf16) is re-read
//   per CTA from L2. (A split-K variant would spread a T=1 decode over all SMs: left for the tuner.)
// collapse_kernel: grid (T, ceil(d/256)), 256 threads. Warp 0 turns mix[t] into pre/post/comb
//   (one comb entry per lane for hc*hc <= 32, the same float operations as mhc_math.h; larger
//   hc: thread 0 runs mhc_math.h itself), CTA column-block 0 writes post and comb, then every
//   thread writes one y[t][k] = sum_i pre[i] X[t][i][k]. The 4x4 Sinkhorn is recomputed by each
//   column block (a few hundred flops on one warp) instead of a 4th launch.
//   The final hyper-head uses the same two kernels with n_mix = hc and no Sinkhorn.
// post_kernel: grid (T, ceil(d/256)), 256 threads, one output column k per thread: reads the hc
//   input streams at k (so out == X in place is safe), writes the hc output streams at k:
//   out[t][j][k] = post[t][j] f[t][k] + sum_i comb[t][i][j] X[t][i][k]. post/comb come via smem.
#include "dsa/ops/mhc/mhc_cuda.h"
#include "dsa/ops/mhc/mhc_math.h"
#include "dsa/ops/norm/cuda_elem.cuh"
#include "dsa/core/cuda_launch.h"
#include "dsa/core/cuda_stream.h"

namespace dsa::ops::cuda {
namespace {

constexpr int kThreads = 256;

__device__ __forceinline__ int64_t esize(DType t) { return t == DType::BF16 ? 2 : 4; }

__global__ void mix_kernel(MhcPreArgs a) {
  __shared__ float scratch[32];
  const int64_t t = blockIdx.x;
  const int r = blockIdx.y;
  const int64_t n = static_cast<int64_t>(a.hc) * a.d;
  const char* xt = static_cast<const char*>(a.X) + t * n * esize(a.x_dtype);
  const float* f = a.fn + static_cast<int64_t>(r) * n;
  float dot = 0.f, ss = 0.f;
  if (a.x_dtype == DType::F32 && n % 4 == 0 && (reinterpret_cast<uintptr_t>(xt) | reinterpret_cast<uintptr_t>(f)) % 16 == 0) {
    // 16-byte loads, 4 in flight per thread: a decode token is latency-bound otherwise.
    const float4* x4 = reinterpret_cast<const float4*>(xt);
    const float4* f4 = reinterpret_cast<const float4*>(f);
    const int64_t n4 = n / 4;
    int64_t k = threadIdx.x;
    for (; k + 3 * blockDim.x < n4; k += 4 * blockDim.x) {
      float4 xv[4], fv[4];
#pragma unroll
      for (int u = 0; u < 4; ++u) {
        xv[u] = x4[k + u * blockDim.x];
        fv[u] = f4[k + u * blockDim.x];
      }
#pragma unroll
      for (int u = 0; u < 4; ++u) {
        dot = fmaf(fv[u].x, xv[u].x, fmaf(fv[u].y, xv[u].y, fmaf(fv[u].z, xv[u].z, fmaf(fv[u].w, xv[u].w, dot))));
        ss = fmaf(xv[u].x, xv[u].x, fmaf(xv[u].y, xv[u].y, fmaf(xv[u].z, xv[u].z, fmaf(xv[u].w, xv[u].w, ss))));
      }
    }
    for (; k < n4; k += blockDim.x) {
      const float4 xv = x4[k], fv = f4[k];
      dot = fmaf(fv.x, xv.x, fmaf(fv.y, xv.y, fmaf(fv.z, xv.z, fmaf(fv.w, xv.w, dot))));
      ss = fmaf(xv.x, xv.x, fmaf(xv.y, xv.y, fmaf(xv.z, xv.z, fmaf(xv.w, xv.w, ss))));
    }
  } else {
    for (int64_t k = threadIdx.x; k < n; k += blockDim.x) {
      const float v = ld(xt, a.x_dtype, k);
      dot = fmaf(f[k], v, dot);
      ss = fmaf(v, v, ss);
    }
  }
  dot = block_sum(dot, scratch);
  ss = block_sum(ss, scratch);
  if (threadIdx.x == 0) a.mix[t * a.n_mix + r] = dot * (1.0f / sqrtf(ss / static_cast<float>(n) + a.norm_eps));
}

// The Sinkhorn of one token on one warp: lane i*hc + j holds comb[i][j] in a register (hc*hc <=
// 32); row and column sums read the hc values of the row / column through shuffles in the same
// order as mhc_split_sinkhorn (0.0f + c0 + c1 + ...), so the float operations are the same.
__device__ void warp_split_sinkhorn(const float* mix, const float* scale, const float* base, int hc, int iters,
                                    float hc_eps, float* pre, float* post, float* comb) {
  const int lane = threadIdx.x % 32, i = lane / hc, j = lane % hc;
  const bool on = lane < hc * hc;
  if (lane < hc) {
    pre[lane] = mhc_sigmoid(mix[lane] * scale[0] + base[lane]) + hc_eps;
    post[lane] = 2.0f * mhc_sigmoid(mix[hc + lane] * scale[1] + base[hc + lane]);
  }
  float c = on ? mix[2 * hc + lane] * scale[2] + base[2 * hc + lane] : 0.f;
  auto row_at = [&](float v, int jj) { return __shfl_sync(0xffffffffu, v, i * hc + jj); };
  auto col_at = [&](float v, int ii) { return __shfl_sync(0xffffffffu, v, ii * hc + j); };
  float m = -INFINITY;
  for (int jj = 0; jj < hc; ++jj) m = fmaxf(m, row_at(c, jj));
  c = expf(c - m);
  float s = 0.0f;
  for (int jj = 0; jj < hc; ++jj) s += row_at(c, jj);
  c = c / s + hc_eps;
  s = 0.0f;
  for (int ii = 0; ii < hc; ++ii) s += col_at(c, ii);
  c /= (s + hc_eps);
  for (int it = 1; it < iters; ++it) {
    s = 0.0f;
    for (int jj = 0; jj < hc; ++jj) s += row_at(c, jj);
    c /= (s + hc_eps);
    s = 0.0f;
    for (int ii = 0; ii < hc; ++ii) s += col_at(c, ii);
    c /= (s + hc_eps);
  }
  if (on) comb[lane] = c;
}

__global__ void collapse_kernel(MhcPreArgs a) {
  __shared__ float pre_s[kMhcMaxHc], post_s[kMhcMaxHc], comb_s[kMhcMaxHc * kMhcMaxHc];
  const int64_t t = blockIdx.x;
  if (!a.head && a.hc * a.hc <= 32) {
    if (threadIdx.x < 32)
      warp_split_sinkhorn(a.mix + t * a.n_mix, a.scale, a.base, a.hc, a.iters, a.hc_eps, pre_s, post_s, comb_s);
    __syncthreads();
    if (blockIdx.y == 0) {
      if (threadIdx.x < a.hc) a.post[t * a.hc + threadIdx.x] = post_s[threadIdx.x];
      if (threadIdx.x < a.hc * a.hc) a.comb[t * a.hc * a.hc + threadIdx.x] = comb_s[threadIdx.x];
    }
  } else if (threadIdx.x == 0) {
    float pre[kMhcMaxHc], post[kMhcMaxHc], comb[kMhcMaxHc * kMhcMaxHc];
    const float* m = a.mix + t * a.n_mix;
    if (a.head) {
      mhc_head_weights(m, a.scale, a.base, a.hc, a.hc_eps, pre);
    } else {
      mhc_split_sinkhorn(m, a.scale, a.base, a.hc, a.iters, a.hc_eps, pre, post, comb);
      if (blockIdx.y == 0) {
        for (int i = 0; i < a.hc; ++i) a.post[t * a.hc + i] = post[i];
        for (int i = 0; i < a.hc * a.hc; ++i) a.comb[t * a.hc * a.hc + i] = comb[i];
      }
    }
    for (int i = 0; i < a.hc; ++i) pre_s[i] = pre[i];
  }
  __syncthreads();
  const int64_t k = static_cast<int64_t>(blockIdx.y) * blockDim.x + threadIdx.x;
  if (k >= a.d) return;
  const char* xt = static_cast<const char*>(a.X) + t * a.hc * a.d * esize(a.x_dtype);
  float acc = 0.f;
  for (int i = 0; i < a.hc; ++i) acc = fmaf(pre_s[i], ld(xt, a.x_dtype, i * a.d + k), acc);
  st(a.y, a.y_dtype, t * a.d + k, acc);
}

__global__ void post_kernel(MhcPostArgs a) {
  __shared__ float post_s[kMhcMaxHc], comb_s[kMhcMaxHc * kMhcMaxHc];
  const int64_t t = blockIdx.x;
  if (threadIdx.x < a.hc) post_s[threadIdx.x] = a.post[t * a.hc + threadIdx.x];
  if (threadIdx.x < a.hc * a.hc) comb_s[threadIdx.x] = a.comb[t * a.hc * a.hc + threadIdx.x];
  __syncthreads();
  const int64_t k = static_cast<int64_t>(blockIdx.y) * blockDim.x + threadIdx.x;
  if (k >= a.d) return;
  const int64_t xo = t * a.hc * a.d;
  float xs[kMhcMaxHc];  // unrolled fixed-trip loops keep the streams in registers
#pragma unroll
  for (int i = 0; i < kMhcMaxHc; ++i) xs[i] = i < a.hc ? ld(a.X, a.x_dtype, xo + i * a.d + k) : 0.f;
  const float fv = ld(a.f, a.f_dtype, t * a.d + k);
  for (int j = 0; j < a.hc; ++j) {
    float acc = post_s[j] * fv;
#pragma unroll
    for (int i = 0; i < kMhcMaxHc; ++i)
      if (i < a.hc) acc = fmaf(comb_s[i * a.hc + j], xs[i], acc);
    st(a.out, a.out_dtype, xo + j * a.d + k, acc);
  }
}

void check_grid(int64_t T, int64_t y, const char* what) {
  if (T > 0x7fffffffLL || y > 65535) cuda_launch::launch_error(what);
}

}  // namespace

void mhc_pre(const MhcPreArgs& a) {
  if (a.tokens == 0) return;
  check_grid(a.tokens, a.n_mix, "mhc_pre: grid exceeds the launch limits");
  mix_kernel<<<dim3(static_cast<unsigned>(a.tokens), a.n_mix), kThreads, 0, DSA_CURRENT_STREAM>>>(a);
  cuda_launch::check_launch("mhc mix_kernel");
  const int64_t cols = (a.d + kThreads - 1) / kThreads;
  check_grid(a.tokens, cols, "mhc_pre: grid exceeds the launch limits");
  collapse_kernel<<<dim3(static_cast<unsigned>(a.tokens), static_cast<unsigned>(cols)), kThreads, 0, DSA_CURRENT_STREAM>>>(a);
  cuda_launch::check_launch("mhc collapse_kernel");
}

void mhc_post(const MhcPostArgs& a) {
  if (a.tokens == 0 || a.d == 0) return;
  const int64_t cols = (a.d + kThreads - 1) / kThreads;
  check_grid(a.tokens, cols, "mhc_post: grid exceeds the launch limits");
  post_kernel<<<dim3(static_cast<unsigned>(a.tokens), static_cast<unsigned>(cols)), kThreads, 0, DSA_CURRENT_STREAM>>>(a);
  cuda_launch::check_launch("mhc post_kernel");
}

}  // namespace dsa::ops::cuda
