// Grouped expert GEMM kernel (portable: mma.sync bf16 m16n8k16, cp.async, no wgmma, <= 99 KB smem,
// so one kernel serves SM90 and SM120). Included by one .cu per weight format.
//
// What it computes: out[r][n] = sum_k a[src(r)][k] * dequant(W[e(r)])[n][k] (expert_gemm.h),
// optionally with SwiGLU fused on the fp32 accumulators.
//
// Launch shape: grid (ceil(N_tiles), ceil(rows / BM), splits), 128 threads (4 warps side by side
// along N), or 256 with KSPLIT = 2 (two warps per weight-row group, each taking half of every
// chunk's k). blockIdx.z is the split-K slice of dense calls (Args::splits; 1 otherwise): the CTA
// walks only its slice's 128-k chunks and the tile's last CTA adds the slices (splitk_finish).
// A CTA owns BM rows (one expert: segments are aligned to a multiple of BM) and BN = 4*NTW*8
// weight rows. blockIdx.x runs over N so that the CTAs of one row tile run together and share
// the activation tile through L2. Tiles whose expert is -1 (padding beyond the used rows: the
// grid is sized by the host-side upper bound) exit at once.
//
// Pipeline: K is walked in chunks of 128. Each chunk's activation tile (bf16, BM x 128), raw
// weight tile (packed e2m1, e4m3 or bf16, BN x 128) and its scales (none for bf16) are copied
// with cp.async into one of STAGES shared-memory stages (multi-stage ring: up to STAGES-1 chunks
// in flight, which is what keeps HBM busy at decode where every weight byte is used once).
//
// Dequantization happens in registers right before the MMA (docs/kernels.md "MoE expert GEMM at
// decode"). Lane (g, q) of a warp owns, per 8-row n-tile, weight row g and the 32 consecutive k
// values [32q, 32q+32) of the chunk: 16 bytes of e2m1 (exactly one UE8M0 block) or 32 bytes of
// e4m3. The dot product does not care about k order, so the MMA's k slots are assigned to these
// values in whatever order makes dequantization cheapest; the activation fragments are permuted
// to the same order with byte permutes (the permutation is a function of q only, identical for
// A and B, hence exact):
//   e2m1: bf16 bits = sign<<15 | (code&7)<<6 is the value times 2^-126 (subnormal case included);
//         for a 32-bit word of 8 nibbles, pairs (k_i, k_i+4) come out with two shifts and masks,
//         then one bf16x2 multiply by 2^(ue8m0-1) restores the scale exactly.
//   e4m3: bf16 bits = sign<<15 | (code&0x7f)<<4 is the value times 2^-120; pairs (k_i, k_i+2);
//         multiplied by 2^120, and the 128x128 block scale (fp32 or UE8M0, read once per CTA
//         into a shared-memory fp32 table) is applied to a per-chunk fp32 partial sum (exact
//         for any fp32 scale).
//   bf16 (unquantized weights): nothing to dequantize; the weight tile is bf16 like the
//         activation tile, so both use the natural k order (no permutes) and the same swizzle.
// Shared-memory swizzles keep the 16-byte fragment loads conflict-free (see a_off / w_off).
#pragma once
#include "dsa/core/pdl.cuh"
#include <cuda_bf16.h>

#include <cstdint>

#include "dsa/ops/moe/cuda/expert_gemm_args.h"
#include "dsa/core/cuda_stream.h"

namespace dsa::ops::cuda::egemm {

enum Fmt : int { kMxfp4 = 0, kFp8 = 1, kBf16 = 2 };
constexpr int kMaxSmem = 101376;  // SM120's dynamic shared memory per block (the portable limit)

template <int FMT, int BM, int NTW, int STAGES, int KSPLIT>
struct Cfg {
  static constexpr int kWarps = 4 * KSPLIT, kThreads = 32 * kWarps;
  static constexpr int BN = 4 * NTW * 8;
  static constexpr int kWRow = FMT == kMxfp4 ? 64 : (FMT == kFp8 ? 128 : 256);  // weight bytes per row per chunk
  static constexpr int kABytes = BM * 256;
  static constexpr int kWBytes = BN * kWRow;
  static constexpr int kSBytes = FMT == kMxfp4 ? BN * 4 : 0;  // FP8 scales: one table per CTA
  static constexpr int kStage = kABytes + kWBytes + (kSBytes + 127) / 128 * 128;
  static constexpr int kSmem = kStage * STAGES;
  static_assert(kSmem <= kMaxSmem, "must fit SM120's 99 KB per block");
};

__device__ __forceinline__ void cp_async16(void* smem, const void* gmem, bool valid) {
  uint32_t s = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  int n = valid ? 16 : 0;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(gmem), "r"(n));
}
__device__ __forceinline__ void cp_async4(void* smem, const void* gmem, bool valid) {
  uint32_t s = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  int n = valid ? 4 : 0;
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(s), "l"(gmem), "r"(n));
}
// Sized forms: n = 16 / 4 copies, n = 0 zero-fills without reading (gmem must still be valid).
__device__ __forceinline__ void cp_async16_n(void* smem, const void* gmem, int n) {
  uint32_t s = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(gmem), "r"(n));
}
__device__ __forceinline__ void cp_async4_n(void* smem, const void* gmem, int n) {
  uint32_t s = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(s), "l"(gmem), "r"(n));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

__device__ __forceinline__ void mma_bf16(float* c, uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint32_t b0,
                                         uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

__device__ __forceinline__ uint32_t bmul2(uint32_t x, uint32_t m) {
  __nv_bfloat162 r = __hmul2(*reinterpret_cast<__nv_bfloat162*>(&x), *reinterpret_cast<__nv_bfloat162*>(&m));
  return *reinterpret_cast<uint32_t*>(&r);
}

// e2m1 pair i of word w: (nibble i, nibble i+4) as bf16x2 scaled by 2^-126.
template <int I>
__device__ __forceinline__ uint32_t e2m1_pair(uint32_t w) {
  constexpr int ss = 12 - 4 * I, ms = 6 - 4 * I;
  uint32_t sg = (w << ss) & 0x80008000u;
  uint32_t mg = (ms >= 0 ? (w << (ms >= 0 ? ms : 0)) : (w >> (ms < 0 ? -ms : 0))) & 0x01C001C0u;
  return sg | mg;
}
// e4m3 pairs of word w: (byte0, byte2) and (byte1, byte3) as bf16x2 scaled by 2^-120.
__device__ __forceinline__ uint32_t e4m3_pair02(uint32_t w) {
  return ((w << 8) & 0x80008000u) | ((w << 4) & 0x07F007F0u);
}
__device__ __forceinline__ uint32_t e4m3_pair13(uint32_t w) { return (w & 0x80008000u) | ((w >> 4) & 0x07F007F0u); }

// UE8M0 exponent byte -> fp32 (as core/dtype_conv.h's ue8m0_to_f32: 255 = NaN, 0 = 2^-127).
__device__ __forceinline__ float ue8m0_f32_dev(uint32_t b) {
  return b == 0xFFu ? __int_as_float(0x7FC00000)
                    : (b == 0u ? __int_as_float(0x00400000) : __int_as_float(static_cast<int>(b << 23)));
}

// One output value / an adjacent pair (col even) of row `row`, as bf16 or fp32 (Args::out_f32).
__device__ __forceinline__ void store_out(const Args& p, int64_t row, int col, float v) {
  if (p.out_f32)
    static_cast<float*>(p.out)[row * p.ldo + col] = v;
  else
    static_cast<__nv_bfloat16*>(p.out)[row * p.ldo + col] = __float2bfloat16_rn(v);
}
__device__ __forceinline__ void store_out2(const Args& p, int64_t row, int col, float v0, float v1) {
  if (p.out_f32)
    *reinterpret_cast<float2*>(static_cast<float*>(p.out) + row * p.ldo + col) = make_float2(v0, v1);
  else
    *reinterpret_cast<__nv_bfloat162*>(static_cast<__nv_bfloat16*>(p.out) + row * p.ldo + col) = __floats2bfloat162_rn(v0, v1);
}
// silu(min(gate, L)) * clamp(up, -L, L) (L = 0: no clamp), from fp32 sums.
__device__ __forceinline__ float swiglu_dev(float gt, float up, float limit) {
  if (limit > 0.f) {
    gt = fminf(gt, limit);
    up = fmaxf(fminf(up, limit), -limit);
  }
  return gt / (1.f + expf(-gt)) * up;
}

// ---- split-K (dense calls; Args::splits > 1) ----
// A CTA's partial sum for layout row `row` and weight row `wr` (SwiGLU: the gate or up row) goes
// to ws[blockIdx.z][row][wr], past L1 (the reducing CTA runs on another SM).
__device__ __forceinline__ void splitk_store(const Args& p, int64_t row, int wr, float v) {
  __stcg(p.ws + (static_cast<int64_t>(blockIdx.z) * p.rows + row) * p.N + wr, v);
}
// Fixed-order sum over the splits of ws[s][row][wr] (s = 0, 1, ...), loads issued 4 at a time
// (scalars: an 8-wide array made ptxas spill the KSPLIT = 2 tile).
__device__ __forceinline__ float splitk_sum(const Args& p, int64_t row, int wr) {
  const float* src = p.ws + row * p.N + wr;
  const int64_t ss = p.rows * p.N;
  const int S = p.splits;
  float acc = 0.f;
  int s = 0;
  for (; s + 4 <= S; s += 4) {
    const float v0 = __ldcg(src + s * ss), v1 = __ldcg(src + (s + 1) * ss), v2 = __ldcg(src + (s + 2) * ss),
                v3 = __ldcg(src + (s + 3) * ss);
    acc += v0;
    acc += v1;
    acc += v2;
    acc += v3;
  }
  for (; s < S; ++s) acc += __ldcg(src + s * ss);
  return acc;
}
// Tail of every split-K CTA, called by all of its threads after they stored their partials
// (splitk_store). The CTA is counted in counters[tile]; the one that completes the count (the
// last of the tile's splits to get there, whichever it is) adds the partials of every split in
// slice order with splitk_sum, so the result is the same bits whatever the timing, and writes
// the tile's outputs: layout rows [m0, m0 + BR), output columns [c0, c0 + BC) (SwiGLU: column c
// from gate row c and up row N/2 + c). It then sets the counter back to 0 for the next launch
// on the stream. Release/acquire: each thread's __threadfence before the barrier and the
// counting atomic orders its partials before the count; the last CTA fences again and reads
// with ld.cg (L2, never a stale L1 line).
template <int NT>
__device__ __forceinline__ void splitk_finish(const Args& p, int64_t m0, int BR, int c0, int BC) {
  __threadfence();
  __syncthreads();
  const int tile = static_cast<int>(blockIdx.y * gridDim.x + blockIdx.x);
  int last = 0;
  if (threadIdx.x == 0) last = atomicAdd(p.counters + tile, 1) == p.splits - 1;
  if (!__syncthreads_or(last)) return;
  __threadfence();
  const int ncols = p.swiglu ? p.N / 2 : p.N;
  const int nr = static_cast<int>(min(static_cast<int64_t>(BR), p.rows - m0)), nc = min(BC, ncols - c0);
  for (int i = threadIdx.x; i < nr * nc; i += NT) {
    const int r = i / nc, col = c0 + (i - r * nc);
    const int64_t row = m0 + r;
    float v = splitk_sum(p, row, col);
    if (p.swiglu) v = swiglu_dev(v, splitk_sum(p, row, p.N / 2 + col), p.limit);
    store_out(p, row, col, v);
  }
  if (threadIdx.x == 0) p.counters[tile] = 0;
}

// Activation tile: row r holds 16 units of 16 bytes (8 bf16); unit u is stored at u ^ f(u, r) so
// that the 8 lanes of one 16-byte load phase (rows r, r+1; q = 0..3) hit 8 distinct bank groups.
__device__ __forceinline__ int a_off(int r, int u) { return r * 256 + ((u ^ (((u >> 3) & 1) | ((r & 1) << 1))) << 4); }
// Weight tile: e2m1 rows of 64 bytes are read linearly (conflict-free); e4m3 rows of 128 bytes
// swap odd/even 16-byte units on odd rows; bf16 rows of 256 bytes are read with the activation
// tile's access pattern (lane (g, q) reads unit 4q + jp of row g), so they share its swizzle.
template <int FMT>
__device__ __forceinline__ int w_off(int r, int u) {
  if constexpr (FMT == kBf16) return a_off(r, u);
  return FMT == kMxfp4 ? r * 64 + u * 16 : r * 128 + ((u ^ (r & 1)) << 4);
}

template <int FMT, int BM, int NTW, int STAGES, int KSPLIT>
__global__ void __launch_bounds__(128 * KSPLIT) expert_gemm_kernel(const Args p) {
  pdl::entry();
  using C = Cfg<FMT, BM, NTW, STAGES, KSPLIT>;
  constexpr int BN = C::BN, MT = BM / 16, HALF = NTW / 2, NT = C::kThreads;
  constexpr int JP = 4 / KSPLIT;                 // 16-k steps (pairs of MMAs) per warp per chunk
  constexpr int WPJ = FMT == kMxfp4 ? 1 : 2;     // weight words per step
  extern __shared__ __align__(128) uint8_t smem[];

  // Warp (ng, ks): ng = which 8*NTW weight rows, ks = which part of every chunk's k range (with
  // KSPLIT = 2 two warps share the rows and split k; their sums are added at the end). KSPLIT = 2
  // doubles the warps per weight byte, for decode where few CTAs exist (latency-bound).
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, q = lane & 3;
  const int ng = warp & 3, ks = warp >> 2;
  const int64_t m0 = static_cast<int64_t>(blockIdx.y) * BM;
  const int e = p.m_indices ? p.m_indices[m0] : 0;
  if (e < 0 || e >= p.E) return;  // padding tile (or out-of-range expert id): nothing to do

  const int N = p.N, K = p.K, half_n = N / 2;
  // This CTA's 128-k chunks: [kc0, kc0 + nk) (the whole K unless split).
  const int kc0 = static_cast<int>(blockIdx.z) * p.split_chunks, nk = min(K / 128 - kc0, p.split_chunks);
  // Weight row of tile-local row r. With SwiGLU, warp w's n-tiles [0, HALF) are gate rows and
  // [HALF, NTW) the matching up rows, so each thread holds gate and up of the same columns.
  auto wrow = [&](int r) -> int {
    if (!p.swiglu) return blockIdx.x * BN + r;
    const int w = r / (NTW * 8), t = (r / 8) % NTW, gg = r % 8;
    const int col = blockIdx.x * (BN / 2) + w * HALF * 8 + (t % HALF) * 8 + gg;
    return t < HALF ? col : half_n + col;
  };
  auto wrow_ok = [&](int r, int row) { return p.swiglu ? (blockIdx.x * (BN / 2) + (r / (NTW * 8)) * HALF * 8 + ((r / 8) % NTW % HALF) * 8 + r % 8) < half_n : row < N; };

  // ---- per-thread copy assignments (fixed for the whole K loop) ----
  constexpr int kAUnits = BM * 16 / NT;  // 16-byte activation units per thread per chunk
  static_assert(kAUnits >= 1 && BM * 16 % NT == 0, "activation copy split");
  const __nv_bfloat16* a_src[kAUnits];
  const __nv_bfloat16* A = static_cast<const __nv_bfloat16*>(p.a);
  int a_dst[kAUnits];
#pragma unroll
  for (int i = 0; i < kAUnits; ++i) {
    const int idx = tid + i * NT, r = idx >> 4, u = idx & 15;
    const int64_t row = m0 + r;
    bool ok = row < p.rows && (!p.m_indices || p.m_indices[row] == e);
    int64_t src = row;
    if (ok && p.a_rows) src = p.a_rows[row];
    ok = ok && src >= 0 && src < p.a_nrows;
    a_src[i] = ok ? A + src * K + static_cast<int64_t>(kc0) * 128 + u * 8 : nullptr;
    a_dst[i] = a_off(r, u);
  }
  constexpr int kUPerRow = C::kWRow / 16;
  constexpr int kWUnits = BN * kUPerRow / NT;
  static_assert(kWUnits >= 1 && BN * kUPerRow % NT == 0, "weight copy split");
  const uint8_t* w_src[kWUnits];
  int w_dst[kWUnits];
  const int64_t wrow_bytes = FMT == kMxfp4 ? K / 2 : (FMT == kFp8 ? K : 2 * static_cast<int64_t>(K));
#pragma unroll
  for (int i = 0; i < kWUnits; ++i) {
    const int idx = tid + i * NT, r = idx / kUPerRow, u = idx % kUPerRow;
    const int row = wrow(r);
    w_src[i] = wrow_ok(r, row) ? p.w + (static_cast<int64_t>(e) * N + row) * wrow_bytes + static_cast<int64_t>(kc0) * C::kWRow + u * 16
                               : nullptr;
    w_dst[i] = w_off<FMT>(r, u);
  }
  // MXFP4 scales: one 4-byte word (4 UE8M0 of this chunk) per weight row, copied per stage.
  const uint8_t* s_src = nullptr;
  if (FMT == kMxfp4) {
    if (tid < BN) {
      const int row = wrow(tid);
      if (wrow_ok(tid, row))
        s_src = static_cast<const uint8_t*>(p.scale) + (static_cast<int64_t>(e) * N + row) * (K / 32) + 4 * static_cast<int64_t>(kc0);
    }
  }

  auto load_stage = [&](int kc, int st) {
    uint8_t* base = smem + st * C::kStage;
#pragma unroll
    for (int i = 0; i < kAUnits; ++i)
      cp_async16(base + a_dst[i], a_src[i] ? a_src[i] + kc * 128 : A, a_src[i] != nullptr);
    uint8_t* wb = base + C::kABytes;
#pragma unroll
    for (int i = 0; i < kWUnits; ++i)
      cp_async16(wb + w_dst[i], w_src[i] ? w_src[i] + kc * C::kWRow : p.w, w_src[i] != nullptr);
    uint8_t* sb = wb + C::kWBytes;
    if (FMT == kMxfp4) {
      if (tid < BN) cp_async4(sb + tid * 4, s_src ? s_src + kc * 4 : p.w, s_src != nullptr);
    }
  };

  float acc[MT][NTW][4];
#pragma unroll
  for (int i = 0; i < MT; ++i)
#pragma unroll
    for (int t = 0; t < NTW; ++t)
#pragma unroll
      for (int c = 0; c < 4; ++c) acc[i][t][c] = 0.f;

#pragma unroll
  for (int s = 0; s < STAGES - 1; ++s) {
    if (s < nk) load_stage(s, s);
    cp_async_commit();
  }

  // FP8 block scales of this CTA's n-tiles (8-row groups) for each of its chunks, read once as
  // fp32 from UE8M0 or fp32 (no per-call conversion pass); published by the loop's first barrier.
  float* fscl = reinterpret_cast<float*>(smem + C::kSmem);
  if constexpr (FMT == kFp8) {
    const int NB = (N + 127) / 128;
    for (int i = tid; i < (BN / 8) * nk; i += NT) {
      const int grp = i / nk, kc = i - grp * nk;
      const int row = wrow(grp * 8);
      float v = 0.f;
      if (wrow_ok(grp * 8, row)) {
        const int64_t si = (static_cast<int64_t>(e) * NB + row / 128) * (K / 128) + kc0 + kc;
        v = p.scale_ue8m0 ? ue8m0_f32_dev(static_cast<const uint8_t*>(p.scale)[si]) : static_cast<const float*>(p.scale)[si];
      }
      fscl[i] = v;
    }
  }

  for (int kc = 0; kc < nk; ++kc) {
    cp_async_wait<STAGES - 2>();
    __syncthreads();
    {
      const int nxt = kc + STAGES - 1;
      if (nxt < nk) load_stage(nxt, nxt % STAGES);
      cp_async_commit();
    }
    const uint8_t* As = smem + (kc % STAGES) * C::kStage;
    const uint8_t* Ws = As + C::kABytes;
    const uint8_t* Ss = Ws + C::kWBytes;

    // Raw weights of this lane for its k steps: per n-tile 16 (e2m1) or 32 (e4m3) bytes in all.
    uint32_t wr[NTW][JP * WPJ];
    uint32_t m1[NTW], m2[NTW];
    float fsc[NTW];
#pragma unroll
    for (int t = 0; t < NTW; ++t) {
      const int r = ng * NTW * 8 + t * 8 + g;
      if constexpr (FMT == kBf16) {
        (void)r;  // bf16 weights are read per k step below (nothing to dequantize ahead)
      } else if constexpr (FMT == kMxfp4) {
        const uint4 v = *reinterpret_cast<const uint4*>(Ws + w_off<FMT>(r, q));
        if constexpr (KSPLIT == 1) {
          wr[t][0] = v.x; wr[t][1] = v.y; wr[t][2 % (JP * WPJ)] = v.z; wr[t][3 % (JP * WPJ)] = v.w;
        } else {
          wr[t][0] = ks ? v.z : v.x;
          wr[t][1] = ks ? v.w : v.y;
        }
        const uint32_t s = Ss[r * 4 + q];
        // Two exact bf16 multipliers, m1 * m2 = 2^126 * 2^(s-127): 2^(s-1) * 1 when s <= 128,
        // else 2^126 * 2^(s-127) (2^(s-1) would overflow bf16); s = 255 (NaN scale) gives NaN.
        // Branch-free so that the unrolled dequant/MMA stream stays one basic block.
        const uint32_t a = s <= 128u ? (s + 126u) << 7 : (s == 255u ? 0x7FC0u : 0x7E80u);
        const uint32_t b = (s <= 128u || s == 255u) ? 0x3F80u : s << 7;
        m1[t] = a | (a << 16);
        m2[t] = b | (b << 16);
      } else {
        if constexpr (KSPLIT == 1) {
          const uint4 v0 = *reinterpret_cast<const uint4*>(Ws + w_off<FMT>(r, 2 * q));
          const uint4 v1 = *reinterpret_cast<const uint4*>(Ws + w_off<FMT>(r, 2 * q + 1));
          wr[t][0] = v0.x; wr[t][1] = v0.y; wr[t][2] = v0.z; wr[t][3] = v0.w;
          wr[t][4 % (JP * WPJ)] = v1.x; wr[t][5 % (JP * WPJ)] = v1.y; wr[t][6 % (JP * WPJ)] = v1.z; wr[t][7 % (JP * WPJ)] = v1.w;
        } else {
          const uint4 v = *reinterpret_cast<const uint4*>(Ws + w_off<FMT>(r, 2 * q + ks));
          wr[t][0] = v.x; wr[t][1] = v.y; wr[t][2] = v.z; wr[t][3] = v.w;
        }
        fsc[t] = fscl[(ng * NTW + t) * nk + kc];
      }
    }
    float part[FMT == kFp8 ? MT : 1][NTW][4];
    if constexpr (FMT == kFp8) {
#pragma unroll
      for (int i = 0; i < MT; ++i)
#pragma unroll
        for (int t = 0; t < NTW; ++t)
#pragma unroll
          for (int c = 0; c < 4; ++c) part[i][t][c] = 0.f;
    }

#pragma unroll
    for (int jj = 0; jj < JP; ++jj) {
      const int jp = ks * JP + jj;
      // Activation fragments for the two MMAs (X, Y) covering k = 32q + 8jp + [0, 8).
      uint32_t ax[MT][4], ay[MT][4];
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
        const uint4 lo = *reinterpret_cast<const uint4*>(As + a_off(mt * 16 + g, 4 * q + jp));
        const uint4 hi = *reinterpret_cast<const uint4*>(As + a_off(mt * 16 + g + 8, 4 * q + jp));
        if (FMT == kMxfp4) {  // slots <- (k0,k4),(k1,k5) | (k2,k6),(k3,k7)
          ax[mt][0] = __byte_perm(lo.x, lo.z, 0x5410); ax[mt][1] = __byte_perm(hi.x, hi.z, 0x5410);
          ax[mt][2] = __byte_perm(lo.x, lo.z, 0x7632); ax[mt][3] = __byte_perm(hi.x, hi.z, 0x7632);
          ay[mt][0] = __byte_perm(lo.y, lo.w, 0x5410); ay[mt][1] = __byte_perm(hi.y, hi.w, 0x5410);
          ay[mt][2] = __byte_perm(lo.y, lo.w, 0x7632); ay[mt][3] = __byte_perm(hi.y, hi.w, 0x7632);
        } else if (FMT == kBf16) {  // natural order: slots <- (k0,k1),(k2,k3) | (k4,k5),(k6,k7)
          ax[mt][0] = lo.x; ax[mt][1] = hi.x; ax[mt][2] = lo.y; ax[mt][3] = hi.y;
          ay[mt][0] = lo.z; ay[mt][1] = hi.z; ay[mt][2] = lo.w; ay[mt][3] = hi.w;
        } else {  // slots <- (k0,k2),(k1,k3) | (k4,k6),(k5,k7)
          ax[mt][0] = __byte_perm(lo.x, lo.y, 0x5410); ax[mt][1] = __byte_perm(hi.x, hi.y, 0x5410);
          ax[mt][2] = __byte_perm(lo.x, lo.y, 0x7632); ax[mt][3] = __byte_perm(hi.x, hi.y, 0x7632);
          ay[mt][0] = __byte_perm(lo.z, lo.w, 0x5410); ay[mt][1] = __byte_perm(hi.z, hi.w, 0x5410);
          ay[mt][2] = __byte_perm(lo.z, lo.w, 0x7632); ay[mt][3] = __byte_perm(hi.z, hi.w, 0x7632);
        }
      }
#pragma unroll
      for (int t = 0; t < NTW; ++t) {
        uint32_t bx0, bx1, by0, by1;
        if constexpr (FMT == kBf16) {  // weight row g, the same 8 k values as the activation unit
          const uint4 v = *reinterpret_cast<const uint4*>(Ws + w_off<FMT>(ng * NTW * 8 + t * 8 + g, 4 * q + jp));
          bx0 = v.x; bx1 = v.y; by0 = v.z; by1 = v.w;
        } else if constexpr (FMT == kMxfp4) {
          const uint32_t w = wr[t][jj];
          bx0 = bmul2(bmul2(e2m1_pair<0>(w), m1[t]), m2[t]);
          bx1 = bmul2(bmul2(e2m1_pair<1>(w), m1[t]), m2[t]);
          by0 = bmul2(bmul2(e2m1_pair<2>(w), m1[t]), m2[t]);
          by1 = bmul2(bmul2(e2m1_pair<3>(w), m1[t]), m2[t]);
        } else {
          constexpr uint32_t k2p120 = 0x7B807B80u;  // bf16x2 of 2^120
          const uint32_t wa = wr[t][2 * jj], wb = wr[t][2 * jj + 1];
          bx0 = bmul2(e4m3_pair02(wa), k2p120); bx1 = bmul2(e4m3_pair13(wa), k2p120);
          by0 = bmul2(e4m3_pair02(wb), k2p120); by1 = bmul2(e4m3_pair13(wb), k2p120);
        }
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
          if constexpr (FMT == kFp8) {
            mma_bf16(part[mt][t], ax[mt][0], ax[mt][1], ax[mt][2], ax[mt][3], bx0, bx1);
            mma_bf16(part[mt][t], ay[mt][0], ay[mt][1], ay[mt][2], ay[mt][3], by0, by1);
          } else {
            mma_bf16(acc[mt][t], ax[mt][0], ax[mt][1], ax[mt][2], ax[mt][3], bx0, bx1);
            mma_bf16(acc[mt][t], ay[mt][0], ay[mt][1], ay[mt][2], ay[mt][3], by0, by1);
          }
        }
      }
    }
    if constexpr (FMT == kFp8) {
#pragma unroll
      for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int t = 0; t < NTW; ++t)
#pragma unroll
          for (int c = 0; c < 4; ++c) acc[mt][t][c] = fmaf(part[mt][t][c], fsc[t], acc[mt][t][c]);
    }
  }
  cp_async_wait<0>();
  if constexpr (KSPLIT == 2) {  // add the k-half sums of warp pairs (ng, 1) into (ng, 0)
    constexpr int NACC = MT * NTW * 4;
    __syncthreads();  // every warp is done with the pipeline buffers
    float* red = reinterpret_cast<float*>(smem) + (ng * 32 + lane) * NACC;
    if (ks == 1) {
#pragma unroll
      for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int t = 0; t < NTW; ++t)
#pragma unroll
          for (int c = 0; c < 4; ++c) red[(mt * NTW + t) * 4 + c] = acc[mt][t][c];
    }
    __syncthreads();
    if (ks == 1 && p.splits <= 1) return;  // split-K: the whole CTA reaches splitk_finish
    if (ks == 0) {
#pragma unroll
      for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int t = 0; t < NTW; ++t)
#pragma unroll
          for (int c = 0; c < 4; ++c) acc[mt][t][c] += red[(mt * NTW + t) * 4 + c];
    }
  }

  if (p.splits > 1) {  // split-K: fp32 partials by weight row, then the tile's last CTA reduces
    if (ks == 0) {
#pragma unroll
      for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int hrow = 0; hrow < 2; ++hrow) {
          const int64_t row = m0 + mt * 16 + g + hrow * 8;
          if (row >= p.rows) continue;
#pragma unroll
          for (int t = 0; t < NTW; ++t)
#pragma unroll
            for (int j = 0; j < 2; ++j) {
              const int r = ng * NTW * 8 + t * 8 + 2 * q + j, wr = wrow(r);
              if (wrow_ok(r, wr)) splitk_store(p, row, wr, acc[mt][t][2 * hrow + j]);
            }
        }
    }
    if (p.swiglu)
      splitk_finish<NT>(p, m0, BM, static_cast<int>(blockIdx.x) * (BN / 2), BN / 2);
    else
      splitk_finish<NT>(p, m0, BM, static_cast<int>(blockIdx.x) * BN, BN);
    return;
  }

  // ---- epilogue: fp32 accumulators -> bf16 (optionally SwiGLU), valid rows only ----
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
    for (int hrow = 0; hrow < 2; ++hrow) {
      const int64_t row = m0 + mt * 16 + g + hrow * 8;
      if (row >= p.rows || (p.m_indices && p.m_indices[row] != e)) continue;
      if (!p.swiglu) {
#pragma unroll
        for (int t = 0; t < NTW; ++t) {
          const int col = blockIdx.x * BN + ng * NTW * 8 + t * 8 + 2 * q;
          if (col < N) store_out2(p, row, col, acc[mt][t][2 * hrow], acc[mt][t][2 * hrow + 1]);
        }
      } else {
#pragma unroll
        for (int t = 0; t < HALF; ++t) {
          const int col = blockIdx.x * (BN / 2) + ng * HALF * 8 + t * 8 + 2 * q;
          if (col >= half_n) continue;
          float v[2];
#pragma unroll
          for (int j = 0; j < 2; ++j) v[j] = swiglu_dev(acc[mt][t][2 * hrow + j], acc[mt][t + HALF][2 * hrow + j], p.limit);
          store_out2(p, row, col, v[0], v[1]);
        }
      }
    }
  }
}

// Args as the kernels read them: callers that leave the split fields zero (no split-K) get one
// slice of every chunk.
// Dense calls with p.prefetch_w, before pdl::entry(): L2 prefetches of the weight bytes this CTA
// will stream (the BN weight rows of column block blockIdx.y, SwiGLU: its gate and up rows, over
// the k chunks of split blockIdx.z), so that streaming starts while the kernel before, usually a
// latency-bound small one that leaves DRAM idle, finishes. Safe before the wait: no kernel of a
// step writes weights. Only the CTAs of row block 0 prefetch (the others read the same rows).
// chunk_bytes: one weight row's bytes per 128-k chunk (MXFP4 64, FP8 128).
template <int BN>
__device__ __forceinline__ void prefetch_dense_weights(const Args& p, int chunk_bytes) {
  if (!p.prefetch_w || p.m_indices || blockIdx.x != 0) return;
  const int kc0 = static_cast<int>(blockIdx.z) * p.split_chunks, nk = min(p.K / 128 - kc0, p.split_chunks);
  const int64_t wrow_bytes = static_cast<int64_t>(p.K / 128) * chunk_bytes;
  const int lines = (nk * chunk_bytes + 127) / 128;  // per row
  const int half_n = p.N / 2, nbase = static_cast<int>(blockIdx.y) * BN, cbase = static_cast<int>(blockIdx.y) * (BN / 2);
  for (int i = threadIdx.x; i < BN * lines; i += blockDim.x) {
    const int r = i / lines, l = i % lines;
    const int col = cbase + r % (BN / 2);
    const int row = p.swiglu ? (r < BN / 2 ? col : half_n + col) : nbase + r;
    if (p.swiglu ? col < half_n : row < p.N)
      pdl::prefetch_l2(p.w + row * wrow_bytes + static_cast<int64_t>(kc0) * chunk_bytes + 128 * l);
  }
}

inline Args with_split_defaults(const Args& a) {
  Args b = a;
  if (b.splits < 1 || b.split_chunks < 1) {
    b.splits = 1;
    b.split_chunks = b.K / 128;
  }
  return b;
}

// Host-side launch of one configuration (defined in the format's .cu).
// Returns false (nothing launched) when the FP8 scale table (BN/8 x the CTA's chunks) would not
// fit in shared memory, or a split grid has more output tiles than a.num_counters.
template <int FMT, int BM, int NTW, int STAGES, int KSPLIT = 1>
bool launch(const Args& args) {
  const Args a = with_split_defaults(args);
  using C = Cfg<FMT, BM, NTW, STAGES, KSPLIT>;
  auto kern = expert_gemm_kernel<FMT, BM, NTW, STAGES, KSPLIT>;
  static const bool attr_set = [&] {  // once per instantiation (single-device assumption)
    cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, kMaxSmem);
    return true;
  }();
  (void)attr_set;
  const int smem = C::kSmem + (FMT == kFp8 ? C::BN / 8 * a.split_chunks * 4 : 0);
  if (smem > kMaxSmem) return false;
  const int ncols = a.swiglu ? a.N / 2 : a.N;
  const int bn_out = a.swiglu ? C::BN / 2 : C::BN;
  dim3 grid((ncols + bn_out - 1) / bn_out, static_cast<unsigned>((a.rows + BM - 1) / BM), static_cast<unsigned>(a.splits));
  if (a.splits > 1 && static_cast<int64_t>(grid.x) * grid.y > a.num_counters) return false;
  pdl::launch(kern, grid, C::kThreads, smem, DSA_CURRENT_STREAM, a);
  return true;
}

}  // namespace dsa::ops::cuda::egemm
