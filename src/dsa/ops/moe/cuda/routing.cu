// Router kernels: fp32 gate logits, and top-k selection + weights.
#include <cuda_bf16.h>

#include "dsa/ops/moe/cuda/kernels.h"
#include "dsa/ops/moe/router_math.h"
#include "dsa/core/cuda_stream.h"

namespace dsa::ops::cuda {
namespace {

// One warp per token. Scores live in shared memory (E <= 1024 floats per warp); each of the k
// rounds is a warp-wide argmax over the unselected experts (ties -> lower index), so the choice
// matches the CPU reference's (key desc, index asc) order exactly. Launch: ceil(T/4) x 128.
__global__ void route_kernel(const float* logits, const float* bias, const int32_t* token_ids, const int32_t* tid2eid,
                             int64_t vocab, int32_t* ids, float* wts, int T, int E, int k, ScoreFunc f, float scaling) {
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

template <typename G>
__global__ void router_logits_kernel(const __nv_bfloat16* x, const G* gate, float* logits, int T, int E, int H) {
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

}  // namespace

void launch_route(const float* logits, const float* bias, const int32_t* token_ids, const int32_t* tid2eid,
                  int64_t vocab, int32_t* ids, float* wts, int T, int E, int k, ScoreFunc f, float scaling) {
  if (T == 0) return;
  const size_t smem = 4 * 2 * E * sizeof(float);
  route_kernel<<<(T + 3) / 4, 128, smem, DSA_CURRENT_STREAM>>>(logits, bias, token_ids, tid2eid, vocab, ids, wts, T, E, k, f, scaling);
}

void launch_router_logits(const void* x, const void* gate, bool gate_f32, float* logits, int T, int E, int H) {
  if (T == 0) return;
  dim3 grid((E + 7) / 8, (T + 7) / 8);
  const auto* xp = static_cast<const __nv_bfloat16*>(x);
  if (gate_f32)
    router_logits_kernel<float><<<grid, 256, 0, DSA_CURRENT_STREAM>>>(xp, static_cast<const float*>(gate), logits, T, E, H);
  else
    router_logits_kernel<__nv_bfloat16><<<grid, 256, 0, DSA_CURRENT_STREAM>>>(xp, static_cast<const __nv_bfloat16*>(gate), logits, T, E, H);
}

}  // namespace dsa::ops::cuda
