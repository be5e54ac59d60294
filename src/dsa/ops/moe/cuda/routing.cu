// Router kernels: fp32 gate logits, and top-k selection + weights.
#include "dsa/core/pdl.cuh"
#include <cuda_bf16.h>

#include <cstdint>

#include "dsa/ops/moe/cuda/kernels.h"
#include "dsa/ops/moe/cuda/route_warp.cuh"
#include "dsa/ops/moe/router_math.h"
#include "dsa/core/cuda_stream.h"

namespace dsa::ops::cuda {
namespace {

// One warp per token, keys in registers (route_warp.cuh): E <= 32 * J. Launch: ceil(T/4) x 128.
template <int J>
__global__ void __launch_bounds__(128) route_warp_kernel(const float* logits, const float* bias, const int32_t* token_ids,
                                                         const int32_t* tid2eid, int64_t vocab, int32_t* ids, float* wts,
                                                         int T, int E, int k, ScoreFunc f, float scaling) {
  pdl::entry();
  const int lane = threadIdx.x & 31;
  const int t = blockIdx.x * 4 + (threadIdx.x >> 5);
  if (t >= T) return;
  const int32_t* hrow = nullptr;
  if (tid2eid) {
    const int32_t tok = token_ids[t];
    if (tok >= 0 && tok < vocab) hrow = tid2eid + static_cast<int64_t>(tok) * k;
  }
  int id;
  float w;
  rw::route_token<J>(logits + static_cast<int64_t>(t) * E, bias, E, k, f, scaling, tid2eid != nullptr, hrow, lane, id, w);
  if (lane < k) {
    ids[static_cast<int64_t>(t) * k + lane] = id;
    wts[static_cast<int64_t>(t) * k + lane] = w;
  }
}

// Fallback for E > 512 (no model in use): one warp per token, scores in shared memory
// (E <= 1024 floats per warp); each of the k rounds is a warp-wide argmax over the unselected
// experts (ties -> lower index), matching the CPU reference's (key desc, index asc) order.
// Launch: ceil(T/4) x 128.
__global__ void route_kernel(const float* logits, const float* bias, const int32_t* token_ids, const int32_t* tid2eid,
                             int64_t vocab, int32_t* ids, float* wts, int T, int E, int k, ScoreFunc f, float scaling) {
  pdl::entry();
  extern __shared__ float sh[];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int t = blockIdx.x * 4 + warp;
  if (t >= T) return;
  float* s = sh + warp * 2 * E;  // scores, then keys (a selected expert's key becomes NaN)
  float* key = s + E;
  for (int e = lane; e < E; e += 32) {
    s[e] = router_score(logits[static_cast<int64_t>(t) * E + e], f);
    key[e] = router_key(s[e], bias ? bias[e] : 0.f);
  }
  __syncwarp();
  int32_t* id = ids + static_cast<int64_t>(t) * k;
  float* w = wts + static_cast<int64_t>(t) * k;
  int my_id = -1;  // lane i < k keeps slot i
  if (tid2eid) {
    const int32_t tok = token_ids[t];
    if (lane < k) {
      int32_t e = (tok >= 0 && tok < vocab) ? tid2eid[static_cast<int64_t>(tok) * k + lane] : -1;
      my_id = (e >= 0 && e < E) ? e : -1;
    }
  } else {
    for (int i = 0; i < k; ++i) {
      float bk = -INFINITY;
      int bi = 0x7FFFFFFF;
      for (int e = lane; e < E; e += 32) {
        const float kv = key[e];
        if (kv != kv) continue;  // NaN marks an already selected expert
        if (kv > bk || (kv == bk && e < bi)) { bk = kv; bi = e; }
      }
#pragma unroll
      for (int off = 16; off > 0; off >>= 1) {
        const float ok = __shfl_xor_sync(0xFFFFFFFFu, bk, off);
        const int oi = __shfl_xor_sync(0xFFFFFFFFu, bi, off);
        if (ok > bk || (ok == bk && oi < bi)) { bk = ok; bi = oi; }
      }
      if (lane == i) my_id = bi;
      if (lane == 0) key[bi] = __int_as_float(0x7FC00000);
      __syncwarp();
    }
  }
  const float mys = (lane < k && my_id >= 0) ? s[my_id] : 0.f;
  float sum = 0.f;  // summed in slot order on every lane (same order as the CPU reference)
  for (int i = 0; i < k; ++i) sum += __shfl_sync(0xFFFFFFFFu, mys, i);
  if (lane < k) {
    id[lane] = my_id;
    w[lane] = my_id >= 0 ? router_weight(mys, sum, scaling) : 0.f;
  }
}

// logits[t][e] = sum_h x[t][h] * gate[e][h] in fp32. Block = 8 warps; warp w owns expert
// blockIdx.x*8+w and 8 tokens (blockIdx.y*8 ..); lanes stride over h (coalesced gate reads, x rows
// come from L1/L2; with H a multiple of 256, 8 consecutive values per lane and step through
// 16-byte loads). Launch: (ceil(E/8), ceil(T/8)) x 256.
template <typename G>
__device__ __forceinline__ void load8(const G* p, float* v) {
  if constexpr (sizeof(G) == 4) {
    const float4 a = reinterpret_cast<const float4*>(p)[0], b = reinterpret_cast<const float4*>(p)[1];
    v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w, v[4] = b.x, v[5] = b.y, v[6] = b.z, v[7] = b.w;
  } else {
    const uint4 u = *reinterpret_cast<const uint4*>(p);
    const uint32_t w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      v[2 * j] = __uint_as_float(w[j] << 16);
      v[2 * j + 1] = __uint_as_float(w[j] & 0xffff0000u);
    }
  }
}

// Older mapping, kept for H % 8 != 0, H > 8192 or unaligned rows.
template <typename G>
__global__ void router_logits_kernel(const __nv_bfloat16* x, const G* gate, float* logits, int T, int E, int H) {
  pdl::entry();
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int e = blockIdx.x * 8 + warp;
  const int t0 = blockIdx.y * 8;
  if (e >= E) return;
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  const G* g = gate + static_cast<int64_t>(e) * H;
  if (H % 256 == 0) {
    // 8 consecutive values per lane and step (16/32-byte loads): a decode token is latency-bound
    // with one scalar load per lane and step.
#pragma unroll 2
    for (int h = lane * 8; h < H; h += 256) {
      float gv[8];
      load8(g + h, gv);
#pragma unroll
      for (int i = 0; i < 8; ++i) {
        if (t0 + i >= T) break;
        float xv[8];
        load8(x + static_cast<int64_t>(t0 + i) * H + h, xv);
#pragma unroll
        for (int j = 0; j < 8; ++j) acc[i] = fmaf(xv[j], gv[j], acc[i]);
      }
    }
  } else {
    for (int h = lane; h < H; h += 32) {
      float gv;
      if constexpr (sizeof(G) == 4) gv = g[h]; else gv = __bfloat162float(g[h]);
#pragma unroll
      for (int i = 0; i < 8; ++i)
        if (t0 + i < T) acc[i] = fmaf(__bfloat162float(x[static_cast<int64_t>(t0 + i) * H + h]), gv, acc[i]);
    }
  }
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    float v = acc[i];
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xFFFFFFFFu, v, off);
    if (lane == 0 && t0 + i < T) logits[static_cast<int64_t>(t0 + i) * E + e] = v;
  }
}

// logits[t][e] = sum_h x[t][h] * gate[e][h] with fp32 FMAs, the gate read once for all T tokens.
// A CTA (256 threads) owns ES consecutive experts; thread i owns the 8-column groups
// h = 8i + 2048c (c < C = ceil(H/2048)) and keeps the gate values of its ES experts there in
// registers (ES*C*8 floats) across every token. Per token: C 16-byte x loads, ES FMA chains of 8C
// terms, a warp xor tree (16, 8, .., 1), lane 0 -> shared memory; after a tile of 32 tokens,
// thread (t, e) adds the 8 warp partials in warp order. x rows come from L2 once per CTA (each
// x element is used by one thread only, so staging x in shared memory would buy nothing).
// Deterministic (fixed order, no atomics). Order vs the older kernel (a per-lane chain over
// H/256 steps of 8, then the warp tree): here a chain over the thread's 8C columns, the warp
// tree, then a chain over 8 warps. Each product goes through <= 8C + 5 + 7 roundings:
//   |logit - exact| <= (8C + 12) * 2^-24 * sum_h |x[t][h] * gate[e][h]|   (C <= 4: <= 44 u).
// Needs H % 8 == 0, H <= 2048 * C, 16-byte aligned x and gate. Launch: ceil(E/ES) x 256, so
// T=1 with E=256 (ES=2) spreads the 2 MB of gate over 128 CTAs, 4 loads in flight per thread.
template <typename G, int ES, int C>
__global__ void __launch_bounds__(256) router_logits_es_kernel(const __nv_bfloat16* x, const G* gate, float* logits,
                                                               int T, int E, int H) {
  pdl::entry();
  __shared__ float red[32][8][ES];  // [token of the tile][warp][expert]
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int e0 = blockIdx.x * ES;
  float gv[ES][C][8];
#pragma unroll
  for (int es = 0; es < ES; ++es)
#pragma unroll
    for (int c = 0; c < C; ++c) {
      const int h = 8 * tid + 2048 * c;
      if (e0 + es < E && h < H) {
        load8(gate + static_cast<int64_t>(e0 + es) * H + h, gv[es][c]);
      } else {
#pragma unroll
        for (int j = 0; j < 8; ++j) gv[es][c][j] = 0.f;
      }
    }
  for (int t0 = 0; t0 < T; t0 += 32) {
    const int nt = min(32, T - t0);
#pragma unroll 2
    for (int tt = 0; tt < nt; ++tt) {
      const __nv_bfloat16* xr = x + static_cast<int64_t>(t0 + tt) * H;
      float xv[C][8];
#pragma unroll
      for (int c = 0; c < C; ++c) {
        const int h = 8 * tid + 2048 * c;
        if (h < H) {
          load8(xr + h, xv[c]);
        } else {
#pragma unroll
          for (int j = 0; j < 8; ++j) xv[c][j] = 0.f;
        }
      }
      float acc[ES];
#pragma unroll
      for (int es = 0; es < ES; ++es) {
        acc[es] = 0.f;
#pragma unroll
        for (int c = 0; c < C; ++c)
#pragma unroll
          for (int j = 0; j < 8; ++j) acc[es] = fmaf(xv[c][j], gv[es][c][j], acc[es]);
#pragma unroll
        for (int off = 16; off > 0; off >>= 1) acc[es] += __shfl_xor_sync(0xFFFFFFFFu, acc[es], off);
      }
      if (lane == 0) {
#pragma unroll
        for (int es = 0; es < ES; ++es) red[tt][warp][es] = acc[es];
      }
    }
    __syncthreads();
    if (tid < nt * ES) {
      const int tt = tid / ES, es = tid % ES;
      float v = red[tt][0][es];
#pragma unroll
      for (int w = 1; w < 8; ++w) v += red[tt][w][es];
      if (e0 + es < E) logits[static_cast<int64_t>(t0 + tt) * E + e0 + es] = v;
    }
    __syncthreads();
  }
}

template <typename G, int ES>
bool launch_logits_es(const __nv_bfloat16* x, const G* gate, float* logits, int T, int E, int H) {
  const int C = (H + 2047) / 2048;
  const dim3 grid((E + ES - 1) / ES);
  auto* st = DSA_CURRENT_STREAM;
  switch (C) {
    case 1:
      pdl::launch(router_logits_es_kernel<G, ES, 1>, grid, 256, 0, st, x, gate, logits, T, E, H);
      return true;
    case 2:
      pdl::launch(router_logits_es_kernel<G, ES, 2>, grid, 256, 0, st, x, gate, logits, T, E, H);
      return true;
    case 3:
      pdl::launch(router_logits_es_kernel<G, ES, 3>, grid, 256, 0, st, x, gate, logits, T, E, H);
      return true;
    case 4:
      if constexpr (ES <= 2) {
        pdl::launch(router_logits_es_kernel<G, ES, 4>, grid, 256, 0, st, x, gate, logits, T, E, H);
        return true;
      }
      return false;
    default: return false;
  }
}

// ES=2 keeps E/2 CTAs (128 at E=256) for decode; from 9 tokens on ES=4 halves how often x is
// read from L2 (E/ES CTAs each read all of x) while the FMAs per thread stay small.
template <typename G>
bool launch_logits(const __nv_bfloat16* x, const G* gate, float* logits, int T, int E, int H) {
  if (H % 8 != 0 || H > 8192 || reinterpret_cast<uintptr_t>(x) % 16 != 0 || reinterpret_cast<uintptr_t>(gate) % 16 != 0)
    return false;
  if (T > 8 && H <= 6144) return launch_logits_es<G, 4>(x, gate, logits, T, E, H);
  return launch_logits_es<G, 2>(x, gate, logits, T, E, H);
}

}  // namespace

void launch_route(const float* logits, const float* bias, const int32_t* token_ids, const int32_t* tid2eid,
                  int64_t vocab, int32_t* ids, float* wts, int T, int E, int k, ScoreFunc f, float scaling) {
  if (T == 0) return;
  const unsigned grid = static_cast<unsigned>((T + 3) / 4);
  auto* st = DSA_CURRENT_STREAM;
  if (E <= 128)
    pdl::launch(route_warp_kernel<4>, grid, 128, 0, st, logits, bias, token_ids, tid2eid, vocab, ids, wts, T, E, k, f,
                scaling);
  else if (E <= 256)
    pdl::launch(route_warp_kernel<8>, grid, 128, 0, st, logits, bias, token_ids, tid2eid, vocab, ids, wts, T, E, k, f,
                scaling);
  else if (E <= 512)
    pdl::launch(route_warp_kernel<16>, grid, 128, 0, st, logits, bias, token_ids, tid2eid, vocab, ids, wts, T, E, k, f,
                scaling);
  else
    pdl::launch(route_kernel, grid, 128, 4 * 2 * E * sizeof(float), st, logits, bias, token_ids, tid2eid, vocab, ids,
                wts, T, E, k, f, scaling);
}

void launch_router_logits(const void* x, const void* gate, bool gate_f32, float* logits, int T, int E, int H) {
  if (T == 0) return;
  const auto* xp = static_cast<const __nv_bfloat16*>(x);
  if (gate_f32 ? launch_logits(xp, static_cast<const float*>(gate), logits, T, E, H)
               : launch_logits(xp, static_cast<const __nv_bfloat16*>(gate), logits, T, E, H))
    return;
  dim3 grid((E + 7) / 8, (T + 7) / 8);
  if (gate_f32)
    pdl::launch(router_logits_kernel<float>, grid, 256, 0, DSA_CURRENT_STREAM, xp, static_cast<const float*>(gate),
                logits, T, E, H);
  else
    pdl::launch(router_logits_kernel<__nv_bfloat16>, grid, 256, 0, DSA_CURRENT_STREAM, xp,
                static_cast<const __nv_bfloat16*>(gate), logits, T, E, H);
}

}  // namespace dsa::ops::cuda
