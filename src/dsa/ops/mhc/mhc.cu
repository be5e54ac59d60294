// mHC kernels (mhc.h). Three launches per op, all deterministic (fixed reduction order, no
// atomics):
//
// mix_kernel: grid (T, n_mix, S), 256 threads. CTA (t, r, s) computes the partial dot(fn[r], x_t)
//   and the partial sum(x_t^2) over its slice s of the hc*d flattened streams (slices of a
//   multiple of 4 elements; f32 streams: 16-byte loads, four in flight per thread) and writes
//   both to part[t][r][s] / part[t][n_mix][s]. The split-K factor S (mhc_mix_splits) spreads a
//   decode step (T = 1: 24 CTAs of 16K-element dots) over ~2 CTAs per SM, so each CTA needs one
//   or two memory round trips instead of 16; S = 1 once T * n_mix fills the GPU.
// collapse_kernel: grid (T, Y + 1), where column block Y (the last) is the Sinkhorn CTA (head: no
//   Sinkhorn CTA). Every CTA first sums the S partials of token t in slice order (so every CTA
//   gets bit-identical mix logits; column block 0 writes mix). The Sinkhorn CTA then turns mix
//   into post/comb (hc = 4: one warp, sinkhorn4_warp; else one thread running mhc_math.h),
//   and writes
//   them; the other CTAs do not wait for it: y needs only pre = sigmoid(...) + hc_eps, which is
//   independent of the Sinkhorn. Column blocks 0..Y-1 write y[t][k] = sum_i pre[i] X[t][i][k]:
//   plain op: Y = ceil(d / 256), one column per thread; fused norm (mhc_pre_norm): Y = 1 CTA of
//   1024 threads holding y_t in registers (4-column groups, <= 2 per thread, d <= 8192), which
//   also computes yn = round(y) * rsqrt(mean(round(y)^2) + eps) * w -- exactly what rms_norm of
//   the stored y computes, up to float summation order.
// post_kernel: grid (T, ceil(d/256)), 256 threads, one output column k per thread: reads the hc
//   input streams at k (so out == X in place is safe), writes the hc output streams at k:
//   out[t][j][k] = post[t][j] f[t][k] + sum_i comb[t][i][j] X[t][i][k]. post/comb come via smem.
// post_mix_kernel (mhc_post_pre, hc = 4): the post of one sub-layer and the mix of the next in one
//   launch, replacing post_kernel + mix_kernel: grid (T, S), 64 threads; CTA (t, s) owns the
//   columns [s*cols, (s+1)*cols) of all 4 streams (cols = 64 per column pass), so it alone reads
//   and writes them (in place is safe). A thread takes one column per pass: it issues all of its
//   loads first (4 streams, f, and the 96 fn weights of the column: stores to X before them would
//   keep the compiler from hoisting them, and at decode the kernel is one memory round trip when
//   they are all in flight), computes X' exactly as post_kernel does (same fma order), stores it
//   and accumulates the 24 dots fn[r] . X' and sum X'^2. The CTA reduces them in a fixed order
//   (warp shuffles, then the two warps) into part[t][r][s], the layout collapse_kernel sums. The
//   slices are column ranges here, flattened-index ranges in mix_kernel, so the mix logits differ
//   from post + pre by float summation order only.
//
// Accuracy against the CPU reference (double dots): mix within ~1e-5 relative (float partial
// sums), pre/post within float rounding, comb within ~1e-5 absolute (hc = 4: the Sinkhorn
// multiplies by one approximate reciprocal per row/column instead of dividing each entry: a few
// ulp per step over 2 * iters contracting steps), y / yn within one rounding of the output dtype.
#include "dsa/core/pdl.cuh"
#include "dsa/ops/mhc/mhc_cuda.h"
#include "dsa/ops/mhc/mhc_math.h"
#include "dsa/ops/norm/cuda_vec4.cuh"
#include "dsa/core/cuda_launch.h"
#include "dsa/core/cuda_stream.h"

namespace dsa::ops::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kNormThreads = 1024;
constexpr int kMaxSplits = 32;
constexpr int64_t kMinSplitLen = 1024;  // elements per slice at least: keeps the partials cheap

__device__ __forceinline__ int64_t esize(DType t) { return t == DType::BF16 ? 2 : 4; }

int64_t split_len(int64_t n, int splits) { return ((n + splits - 1) / splits + 3) / 4 * 4; }

__global__ void mix_kernel(MhcPreArgs a, int64_t slice) {
  pdl::entry();
  __shared__ float scratch[32];
  const int64_t t = blockIdx.x;
  const int r = blockIdx.y, sp = blockIdx.z;
  const int64_t n_all = static_cast<int64_t>(a.hc) * a.d;
  const int64_t k0 = sp * slice;
  const int64_t n = k0 < n_all ? (n_all - k0 < slice ? n_all - k0 : slice) : 0;
  const char* xt = static_cast<const char*>(a.X) + (t * n_all + k0) * esize(a.x_dtype);
  const float* f = a.fn + static_cast<int64_t>(r) * n_all + k0;
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
  if (threadIdx.x == 0) {
    float* pt = a.part + t * (a.n_mix + 1) * a.splits;
    pt[r * a.splits + sp] = dot;
    if (r == 0) pt[a.n_mix * a.splits + sp] = ss;
  }
}

// hc = 4 (V4), the kernel's critical path: a warp holds comb[i][j] in lane 4i + j (lanes 16..31
// mirror 0..15); row sums are two xor-shuffle steps (lanes 4i..4i+3), column sums two more
// (lanes j, j+4, j+8, j+12), so a half-iteration is ~2 shuffles + an approximate reciprocal
// (MUFU, <= 2 ulp) + a multiply instead of a serial loop of IEEE divisions. (a + b) + (c + d)
// is the same float in every lane of a row/column, so all lanes agree bit for bit.
__device__ void sinkhorn4_warp(const float* mix, const float* scale, const float* base, int iters, float eps,
                               float* post, float* comb) {
  const int lane = threadIdx.x & 31, e = lane & 15;
  auto xs = [](float v, int m) { return __shfl_xor_sync(0xffffffffu, v, m); };
  float c = mix[8 + e] * scale[2] + base[8 + e];
  float m = fmaxf(c, xs(c, 1));
  m = fmaxf(m, xs(m, 2));
  c = expf(c - m);
  float s = c + xs(c, 1);
  s += xs(s, 2);
  c = c / s + eps;
  for (int it = 0; it < iters; ++it) {
    if (it > 0) {
      s = c + xs(c, 1);
      s += xs(s, 2);
      c *= __fdividef(1.0f, s + eps);
    }
    s = c + xs(c, 4);
    s += xs(s, 8);
    c *= __fdividef(1.0f, s + eps);
  }
  if (lane < 16) comb[e] = c;
  if (lane < 4) post[lane] = 2.0f * mhc_sigmoid(mix[4 + lane] * scale[1] + base[4 + lane]);
}

// y columns [4g, 4g+4) of token t: sum_i pre[i] X[t][i][4g..] (elements past d are 0).
__device__ __forceinline__ F4 collapse4(const MhcPreArgs& a, const char* xt, const float* pre, int64_t i,
                                        bool vec) {
  F4 xs[kMhcMaxHc];
#pragma unroll
  for (int s = 0; s < kMhcMaxHc; ++s)
    if (s < a.hc) xs[s] = ld4(xt + s * a.d * esize(a.x_dtype), a.x_dtype, i, a.d, vec);
  F4 acc{};
#pragma unroll
  for (int s = 0; s < kMhcMaxHc; ++s)
    if (s < a.hc)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc.v[e] = fmaf(pre[s], xs[s].v[e], acc.v[e]);
  return acc;
}

template <bool kNorm>
__global__ void __launch_bounds__(kNorm ? kNormThreads : kThreads) collapse_kernel(MhcPreArgs a, bool vec) {
  pdl::entry();
  __shared__ float mix_s[(2 + kMhcMaxHc) * kMhcMaxHc];
  __shared__ float pre_s[kMhcMaxHc];
  __shared__ float scratch[32];
  const int64_t t = blockIdx.x;
  // 1. mix logits from the split-K partials: all loaded at once (one L2 round trip), then summed
  //    in slice order by one thread per logit (identical in every CTA).
  __shared__ float part_s[((2 + kMhcMaxHc) * kMhcMaxHc + 1) * kMaxSplits];
  const int np = (a.n_mix + 1) * a.splits;
  for (int i = threadIdx.x; i < np; i += blockDim.x) part_s[i] = a.part[t * np + i];
  __syncthreads();
  if (threadIdx.x < a.n_mix) {
    float dot = 0.f, ss = 0.f;
    for (int s = 0; s < a.splits; ++s) {
      dot += part_s[threadIdx.x * a.splits + s];
      ss += part_s[a.n_mix * a.splits + s];
    }
    const float n = static_cast<float>(static_cast<int64_t>(a.hc) * a.d);
    const float m = dot * (1.0f / sqrtf(ss / n + a.norm_eps));
    mix_s[threadIdx.x] = m;
    if (blockIdx.y == 0) a.mix[t * a.n_mix + threadIdx.x] = m;
  }
  __syncthreads();
  const bool sinkhorn_cta = !a.head && blockIdx.y == gridDim.y - 1;
  if (sinkhorn_cta) {  // 2a. post / comb (nobody waits for this CTA)
    float* post = a.post + t * a.hc;
    float* comb = a.comb + t * a.hc * a.hc;
    if (a.hc == 4 && threadIdx.x < 32)
      sinkhorn4_warp(mix_s, a.scale, a.base, a.iters, a.hc_eps, post, comb);
    else if (a.hc != 4 && threadIdx.x == 0) {  // no model has another hc: mhc_math.h itself
      float pre[kMhcMaxHc];
      mhc_split_sinkhorn(mix_s, a.scale, a.base, a.hc, a.iters, a.hc_eps, pre, post, comb);
    }
    return;
  }
  // 2b. pre (the same expression for the head and the sub-layers)
  if (threadIdx.x < a.hc) pre_s[threadIdx.x] = mhc_sigmoid(mix_s[threadIdx.x] * a.scale[0] + a.base[threadIdx.x]) + a.hc_eps;
  __syncthreads();
  float pre[kMhcMaxHc];
#pragma unroll
  for (int s = 0; s < kMhcMaxHc; ++s) pre[s] = s < a.hc ? pre_s[s] : 0.f;
  const char* xt = static_cast<const char*>(a.X) + t * a.hc * a.d * esize(a.x_dtype);
  if constexpr (!kNorm) {
    // 3. one column per thread
    const int64_t k = static_cast<int64_t>(blockIdx.y) * blockDim.x + threadIdx.x;
    if (k >= a.d) return;
    float xs[kMhcMaxHc];
#pragma unroll
    for (int s = 0; s < kMhcMaxHc; ++s) xs[s] = s < a.hc ? ld(xt, a.x_dtype, s * a.d + k) : 0.f;
    float acc = 0.f;
#pragma unroll
    for (int s = 0; s < kMhcMaxHc; ++s)
      if (s < a.hc) acc = fmaf(pre[s], xs[s], acc);
    st(a.y, a.y_dtype, t * a.d + k, acc);
  } else {
    // 3'. the whole row in registers: y, then its RMSNorm
    constexpr int U = static_cast<int>(kMhcNormMaxD / (4 * kNormThreads));
    F4 y[U];
    float ss = 0.f;
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int64_t i = 4 * (threadIdx.x + static_cast<int64_t>(u) * blockDim.x);
      y[u] = F4{};
      if (i >= a.d) continue;
      y[u] = collapse4(a, xt, pre, i, vec);
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        // the norm reads y as stored: rounded to y's dtype
        if (a.y_dtype == DType::BF16) y[u].v[e] = round_to_bf16(y[u].v[e]);
        ss = fmaf(y[u].v[e], y[u].v[e], ss);  // padding is 0
      }
      if (a.y) st4(static_cast<char*>(a.y) + t * a.d * esize(a.y_dtype), a.y_dtype, i, a.d, vec, y[u]);
    }
    const float inv = 1.0f / sqrtf(block_sum(ss, scratch) / static_cast<float>(a.d) + a.rms_eps);
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int64_t i = 4 * (threadIdx.x + static_cast<int64_t>(u) * blockDim.x);
      if (i >= a.d) continue;
      F4 o = y[u];
      if (a.norm_w) {
        const F4 w = ld4(a.norm_w, a.norm_w_dtype, i, a.d, vec);
#pragma unroll
        for (int e = 0; e < 4; ++e) o.v[e] = o.v[e] * inv * w.v[e];
      } else {
#pragma unroll
        for (int e = 0; e < 4; ++e) o.v[e] = o.v[e] * inv;
      }
      st4(static_cast<char*>(a.yn) + t * a.d * esize(a.yn_dtype), a.yn_dtype, i, a.d, vec, o);
    }
  }
}

__global__ void post_kernel(MhcPostArgs a) {
  pdl::entry();
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

void check_grid(int64_t T, int64_t y, const char* what);

constexpr int kPostMixThreads = 64;
// Column passes per CTA such that the partials of S slices fit collapse_kernel's buffer
// (part_s: ((2 + kMhcMaxHc) * kMhcMaxHc + 1) * kMaxSplits floats; hc = 4 takes 25 per slice).
constexpr int64_t kPostMixMaxSlices = ((2 + kMhcMaxHc) * kMhcMaxHc + 1) * kMaxSplits / 25;

__global__ void __launch_bounds__(kPostMixThreads) post_mix_kernel(MhcPostIn in, MhcPreArgs a, int64_t cols) {
  pdl::entry();
  constexpr int kHc = 4, kMix = (2 + kHc) * kHc, kWarps = kPostMixThreads / 32;
  __shared__ float post_s[kHc], comb_s[kHc * kHc];
  __shared__ float red[kWarps][kMix + 1];
  const int64_t t = blockIdx.x;
  const int sp = blockIdx.y, lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (threadIdx.x < kHc) post_s[threadIdx.x] = in.post[t * kHc + threadIdx.x];
  if (threadIdx.x < kHc * kHc) comb_s[threadIdx.x] = in.comb[t * kHc * kHc + threadIdx.x];
  __syncthreads();
  const int64_t d = a.d, n_all = kHc * d, xo = t * n_all;
  const int64_t c0 = sp * cols, c1 = c0 + cols < d ? c0 + cols : d;
  const float* __restrict__ fn = a.fn;
  float acc[kMix + 1];
#pragma unroll
  for (int r = 0; r <= kMix; ++r) acc[r] = 0.f;
  for (int64_t k = c0 + threadIdx.x; k < c1; k += kPostMixThreads) {
    float xs[kHc], w[kHc][kMix];
#pragma unroll
    for (int i = 0; i < kHc; ++i) xs[i] = ld(in.X, a.x_dtype, xo + i * d + k);
    const float fv = ld(in.f, in.f_dtype, t * d + k);
#pragma unroll
    for (int j = 0; j < kHc; ++j)
#pragma unroll
      for (int r = 0; r < kMix; ++r) w[j][r] = __ldg(fn + r * n_all + j * d + k);
    float v[kHc];
#pragma unroll
    for (int j = 0; j < kHc; ++j) {
      v[j] = post_s[j] * fv;
#pragma unroll
      for (int i = 0; i < kHc; ++i) v[j] = fmaf(comb_s[i * kHc + j], xs[i], v[j]);
    }
#pragma unroll
    for (int j = 0; j < kHc; ++j) {
      st(in.X, a.x_dtype, xo + j * d + k, v[j]);
      if (a.x_dtype == DType::BF16) v[j] = bf16_bits_to_f32(f32_to_bf16_bits(v[j]));  // the mix reads X' as stored
      acc[kMix] = fmaf(v[j], v[j], acc[kMix]);
#pragma unroll
      for (int r = 0; r < kMix; ++r) acc[r] = fmaf(w[j][r], v[j], acc[r]);
    }
  }
#pragma unroll
  for (int r = 0; r <= kMix; ++r) {
    float v = acc[r];
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    if (lane == 0) red[warp][r] = v;
  }
  __syncthreads();
  if (threadIdx.x <= kMix) {
    float v = 0.f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) v += red[w][threadIdx.x];
    a.part[t * (kMix + 1) * a.splits + threadIdx.x * a.splits + sp] = v;  // the sum of squares is row kMix
  }
}

// The collapse launch of mhc_pre / mhc_post_pre (after the mix partials are in a.part).
void launch_collapse(const MhcPreArgs& a) {
  const int extra = a.head ? 0 : 1;  // the Sinkhorn CTA
  if (a.yn) {
    if (a.d > kMhcNormMaxD) cuda_launch::launch_error("mhc_pre_norm: hidden size exceeds the fused kernel's row");
    const bool vec = vec4_ok(a.X, a.x_dtype, a.d, a.d) && vec4_ok(a.y, a.y_dtype, a.d, a.d) &&
                     vec4_ok(a.yn, a.yn_dtype, a.d, a.d) && vec4_ok(a.norm_w, a.norm_w_dtype, a.d, 0);
    pdl::launch(collapse_kernel<true>, dim3(static_cast<unsigned>(a.tokens), 1 + extra), kNormThreads, 0,
                DSA_CURRENT_STREAM, a, vec);
    cuda_launch::check_launch("mhc collapse_kernel (norm)");
    return;
  }
  const int64_t cols = (a.d + kThreads - 1) / kThreads + extra;
  check_grid(a.tokens, cols, "mhc_pre: grid exceeds the launch limits");
  pdl::launch(collapse_kernel<false>, dim3(static_cast<unsigned>(a.tokens), static_cast<unsigned>(cols)), kThreads, 0,
              DSA_CURRENT_STREAM, a, false);
  cuda_launch::check_launch("mhc collapse_kernel");
}

void check_grid(int64_t T, int64_t y, const char* what) {
  if (T > 0x7fffffffLL || y > 65535) cuda_launch::launch_error(what);
}

}  // namespace

int mhc_mix_splits(int64_t tokens, int n_mix, int64_t n) {
  constexpr int64_t kTargetCtas = 264;  // ~2 per SM of an H200
  const int64_t ctas = tokens * n_mix;
  int64_t s = ctas >= kTargetCtas ? 1 : (kTargetCtas + ctas - 1) / ctas;
  s = s > kMaxSplits ? kMaxSplits : s;
  const int64_t by_len = n / kMinSplitLen;
  s = s > by_len ? by_len : s;
  if (s < 1) s = 1;
  return static_cast<int>((n + split_len(n, static_cast<int>(s)) - 1) / split_len(n, static_cast<int>(s)));
}

void mhc_pre(const MhcPreArgs& a) {
  if (a.tokens == 0) return;
  const int64_t n = static_cast<int64_t>(a.hc) * a.d;
  const int64_t slice = split_len(n, a.splits);
  if (a.splits < 1 || a.splits > kMaxSplits || (a.splits - 1) * slice >= n)
    cuda_launch::launch_error("mhc_pre: split-K factor does not match mhc_mix_splits");
  check_grid(a.tokens, a.n_mix, "mhc_pre: grid exceeds the launch limits");
  pdl::launch(mix_kernel, dim3(static_cast<unsigned>(a.tokens), a.n_mix, a.splits), kThreads, 0, DSA_CURRENT_STREAM, a,
              slice);
  cuda_launch::check_launch("mhc mix_kernel");
  launch_collapse(a);
}

int mhc_post_mix_splits(int64_t d) {
  const int64_t slices = (d + kPostMixThreads - 1) / kPostMixThreads;
  const int64_t passes = (slices + kPostMixMaxSlices - 1) / kPostMixMaxSlices;
  return static_cast<int>((d + passes * kPostMixThreads - 1) / (passes * kPostMixThreads));
}

void mhc_post_pre(const MhcPostIn& in, const MhcPreArgs& a) {
  if (a.tokens == 0) return;
  if (a.hc != 4 || a.head || in.X != a.X || a.splits != mhc_post_mix_splits(a.d))
    cuda_launch::launch_error("mhc_post_pre: needs hc = 4, a sub-layer pre over the post's X and mhc_post_mix_splits");
  check_grid(a.tokens, a.splits, "mhc_post_pre: grid exceeds the launch limits");
  const int64_t cols = (a.d + a.splits - 1) / a.splits;
  pdl::launch(post_mix_kernel, dim3(static_cast<unsigned>(a.tokens), static_cast<unsigned>(a.splits)), kPostMixThreads,
              0, DSA_CURRENT_STREAM, in, a, cols);
  cuda_launch::check_launch("mhc post_mix_kernel");
  launch_collapse(a);
}

void mhc_post(const MhcPostArgs& a) {
  if (a.tokens == 0 || a.d == 0) return;
  const int64_t cols = (a.d + kThreads - 1) / kThreads;
  check_grid(a.tokens, cols, "mhc_post: grid exceeds the launch limits");
  pdl::launch(post_kernel, dim3(static_cast<unsigned>(a.tokens), static_cast<unsigned>(cols)), kThreads, 0,
              DSA_CURRENT_STREAM, a);
  cuda_launch::check_launch("mhc post_kernel");
}

}  // namespace dsa::ops::cuda
