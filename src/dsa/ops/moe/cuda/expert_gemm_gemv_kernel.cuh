// Register-streaming ("GEMV") form of the grouped expert GEMM, for 1-8 rows per expert (decode:
// T = 1..32 tokens over 256-384 experts puts ~1 row on each used expert). Included by
// expert_gemm_gemv_{mxfp4,fp8}.cu; tactics 9 and 10 (expert_gemm.h).
//
// What it computes: the same as expert_gemm_kernel.cuh (expert_gemm.h) for MXFP4 and FP8 weights,
// grouped (m_indices) or dense, SwiGLU fused or not, split-K slices of dense calls.
//
// Why a third kernel: the stream kernel (expert_gemm_stream_kernel.cuh) reaches only ~30-60 % of
// the copy bandwidth for MXFP4 at decode, bound by instruction issue (docs/perf/moe-decode-
// 2026-12-01.md: ~0.114 warp instructions per weight, a third of them cp.async / shared-memory /
// barrier / address work around the unpack). Here every weight byte goes from global memory
// straight into the registers of the lane that unpacks it (16-byte loads, L1 bypassed, the next
// chunk's loads in flight while the current one is unpacked), so there is no cp.async, no
// shared-memory round trip and no barrier in the k loop. The activation rows of the tile (<= 8)
// are read through L1 (every warp of the SM reads the same few KB) into registers, once per chunk
// per warp, and serve all the warp's weight rows.
//
// Why the inner product is still an MMA and not a scalar f32 FMA loop: an exact f32 FMA of a
// bf16 activation and an e2m1 weight needs the weight as one f32 register per value (>= 3 integer
// ops each: no trick builds two f32 from one op), plus the FMA itself: >= 4 instructions per
// weight at one token. bf16 pairs from packed nibbles cost 1.6 per weight (e2m1x8_bf16), the
// UE8M0 scale one bf16x2 multiply per pair (0.5), and mma.sync m16n8k16 with the weights as the
// 16-row A operand and the <= 8 token rows as the 8-column B operand does the 16 x 8 x 16
// multiply-accumulate in fp32 for 1/8 instruction per weight and lane. The 7/8 of the MMA spent on
// absent tokens at T = 1 is free: the tensor pipe is idle otherwise. (FP16 HFMA2 partial sums
// were rejected: not fp32 accumulation, and bf16 activations can overflow fp16.) Products stay
// exact bf16 x bf16 in fp32 as in the other kernels.
//
// Launch shape: grid (ceil(rows / seg_rows), ceil(N_out / BN_out), splits), WR * WK warps. A CTA
// owns one segment of the layout (grouped calls: m_alignment rows, at most 256; dense calls: 8
// rows) and BN = 16 MW WR weight rows (SwiGLU: BN / 2 output columns), and walks the segment's
// 8-row tiles (BT: the MMA's N) that hold rows of an expert: at decode that is ~one CTA per used
// expert and column block, where one CTA per 8 rows would launch 8x as many (64-row alignment),
// nearly all of them padding. Warp (wr, ks) takes MW 16-row groups (wr) and the ks-th contiguous
// part of the CTA's 128-k chunks; the WK partial sums of a row group are added in the order
// ks = 0, 1, ... through shared memory (deterministic). Column blocks of one segment run in
// different CTAs, so an expert's weights are streamed by as many CTAs as it has column blocks.
// The grid depends only on the row capacity, the alignment, N and the split, never on device
// data (CUDA-graph capturable).
//
// Fragment mapping (the stream kernel's, without shared memory): lane (g, q) owns, per 16-row
// group, weight rows g and g + 8, and per 128-k chunk the 32 k values [32q, 32q + 32) (MXFP4: one
// 16-byte load per row = exactly one UE8M0 block; FP8: two 16-byte loads per row). The MMA's k
// slots take the lane's values in the order that unpacks cheapest and the activation fragment of
// token g (B column g) is byte-permuted to the same order, so A and B agree slot by slot. Token
// columns that are not this expert's rows (padding, beyond rows) get zero activations and are
// never stored. With SwiGLU, rows 0-7 of a group are the gate rows of 8 output columns and rows
// 8-15 the matching up rows, so a lane holds gate and up of one column and applies SwiGLU itself.
//
// Requirements (validate_expert_gemm guarantees them): K a multiple of 128 (whole chunks: MXFP4
// blocks of 32 and FP8 blocks of 128 never straddle a lane or a warp), N a multiple of 8 (16 with
// SwiGLU), 16-aligned segments; tensors 16-byte aligned (allocations are).
#pragma once
#include "dsa/core/pdl.cuh"
#include <algorithm>
#include <type_traits>

#include "dsa/ops/moe/cuda/expert_gemm_kernel.cuh"
#include "dsa/ops/moe/cuda/expert_gemm_stream_kernel.cuh"  // e2m1x8_bf16

namespace dsa::ops::cuda::egemm {

template <int FMT, int MW, int WR, int WK, int D>
struct GemvCfg {
  static_assert(FMT == kMxfp4 || FMT == kFp8, "gemv kernel: MXFP4 or FP8 weights");
  static constexpr int kWarps = WR * WK, kThreads = 32 * kWarps;
  static constexpr int BN = 16 * MW * WR;  // weight rows per CTA
  static constexpr int BT = 8;             // layout rows per CTA (the MMA's N)
  // Split-K workspace counters assume >= 64 weight rows per CTA (expert_gemm_cuda.cpp).
  static_assert(BN >= 64, "gemv kernel: at least 64 weight rows per CTA");
  static_assert(D >= 2 && D <= 4, "gemv kernel: 2-4 register sets in the k walk");
  // CTAs per SM the registers must allow (__launch_bounds__): 4 x 128 threads (128 registers)
  // with two register sets, 3 (up to 168) with more; 256 threads: 2.
  static constexpr int kMinBlocks = kThreads > 128 ? 2 : (D == 2 ? 4 : 3);
};

// 16 bytes of weights that are read exactly once: through L2, not allocated in L1 (which holds
// the activation rows every warp of the SM re-reads).
__device__ __forceinline__ uint4 ldg_stream16(const uint8_t* ptr) {
  uint4 v;
  asm("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
      : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
      : "l"(ptr));
  return v;
}

// One chunk's registers of a lane: weights of its 2 MW rows, their scales, token g's activations.
template <int FMT, int MW>
struct GemvFrag {
  static constexpr int kW = FMT == kMxfp4 ? 1 : 2;  // 16-byte weight loads per row and chunk
  uint4 w[MW][2][kW];
  uint32_t s[MW][2];  // MXFP4: the row's 4 UE8M0 bytes of the chunk (byte q is the lane's block)
  float fs[MW][2];    // FP8: the row's block scale of the chunk
  uint4 act[4];       // token g, k = 32q + 8j + [0, 8), j = 0..3
};

// One 8-row tile (layout rows [m0, m0 + 8), expert e) x the CTA's BN weight rows, all threads of
// the CTA. red: the CTA's shared buffer for the WK partial sums.
template <int FMT, int MW, int WR, int WK, int D>
__device__ __forceinline__ void gemv_tile(const Args& p, int64_t m0, int e, float* red) {
  using C = GemvCfg<FMT, MW, WR, WK, D>;
  using Frag = GemvFrag<FMT, MW>;
  constexpr int BN = C::BN, NT = C::kThreads;
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, q = lane & 3;
  const int wr = warp % WR, ks = warp / WR;

  const int N = p.N, K = p.K, half_n = N / 2;
  // The CTA's 128-k chunks [kc0, kc0 + nk) (all of K unless split); warp ks takes [c_lo, c_hi)
  // of them (balanced: every warp gets floor or ceil of nk / WK).
  const int kc0 = static_cast<int>(blockIdx.z) * p.split_chunks, nk = min(K / 128 - kc0, p.split_chunks);
  const int c_lo = nk * ks / WK, c_hi = nk * (ks + 1) / WK;
  const int nbase = static_cast<int>(blockIdx.y) * BN;        // first weight row (no SwiGLU)
  const int cbase = static_cast<int>(blockIdx.y) * (BN / 2);  // first output column (SwiGLU)
  auto out_col = [&](int r) { return cbase + (r >> 4) * 8 + (r & 7); };
  auto wrow = [&](int r) -> int {
    if (!p.swiglu) return nbase + r;
    return (r & 8) ? half_n + out_col(r) : out_col(r);
  };
  auto wrow_ok = [&](int r) { return p.swiglu ? out_col(r) < half_n : nbase + r < N; };

  // ---- per-lane sources (fixed for the whole k walk) ----
  // One 64-bit base per stream (this expert, the CTA's first chunk, the lane's bytes) plus 32-bit
  // row offsets (launch_gemv checks that an expert's weights span < 4 GiB), to keep registers
  // for the loads in flight. Rows beyond N (the last column block) read row 0 of the expert
  // instead: their accumulators are never stored (an MMA's row m depends on row m of A alone), so
  // the loop needs no predicates.
  const int64_t wrow_bytes = FMT == kMxfp4 ? K / 2 : K;
  constexpr int kChunkBytes = FMT == kMxfp4 ? 64 : 128;  // one weight row's bytes per chunk
  constexpr int kLaneBytes = kChunkBytes / 4;            // the lane's share of them
  const int KB = K / 128, NB = (N + 127) / 128;
  const int sbytes = FMT == kFp8 && !p.scale_ue8m0 ? 4 : 1;  // FP8 scale entry: f32 or UE8M0
  const uint8_t* w_base = p.w + static_cast<int64_t>(e) * N * wrow_bytes + static_cast<int64_t>(kc0) * kChunkBytes + q * kLaneBytes;
  const uint8_t* s_base = static_cast<const uint8_t*>(p.scale) +
                          (FMT == kMxfp4 ? static_cast<int64_t>(e) * N * (K / 32) + 4 * static_cast<int64_t>(kc0)
                                         : (static_cast<int64_t>(e) * NB * KB + kc0) * sbytes);
  uint32_t w_off[MW][2], s_off[MW][2];
#pragma unroll
  for (int mt = 0; mt < MW; ++mt)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int r = (wr * MW + mt) * 16 + g + 8 * h;
      const int row = wrow_ok(r) ? wrow(r) : 0;
      w_off[mt][h] = static_cast<uint32_t>(row * wrow_bytes);
      s_off[mt][h] = FMT == kMxfp4 ? static_cast<uint32_t>(row * (K / 32)) : static_cast<uint32_t>(row / 128 * KB * sbytes);
    }
  // MXFP4: per chunk one 4-byte word (the row's 4 UE8M0 blocks); FP8: one scale entry per chunk.
  const int s_step = FMT == kMxfp4 ? 4 : sbytes;
  // Token g of the tile: a row of this expert (else its B column stays zero and is never stored).
  // A valid row whose gathered source is out of range is computed with zero activations.
  const __nv_bfloat16* A = static_cast<const __nv_bfloat16*>(p.a);
  const uint8_t* a_src = reinterpret_cast<const uint8_t*>(A);
  bool a_ok = false;
  {
    const int64_t row = m0 + g;
    if (row < p.rows && (!p.m_indices || p.m_indices[row] == e)) {
      const int64_t src = p.a_rows ? p.a_rows[row] : row;
      if (src >= 0 && src < p.a_nrows) {
        a_src = reinterpret_cast<const uint8_t*>(A + src * K + static_cast<int64_t>(kc0) * 128 + 32 * q);
        a_ok = true;
      }
    }
  }

  auto fetch = [&](int c, Frag& f) {  // chunk c (relative to kc0) into f
    const uint8_t* wc = w_base + static_cast<int64_t>(c) * kChunkBytes;
    const uint8_t* sc = s_base + static_cast<int64_t>(c) * s_step;
#pragma unroll
    for (int mt = 0; mt < MW; ++mt)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
#pragma unroll
        for (int u = 0; u < Frag::kW; ++u) f.w[mt][h][u] = ldg_stream16(wc + w_off[mt][h] + 16 * u);
        if constexpr (FMT == kMxfp4) {
          f.s[mt][h] = __ldg(reinterpret_cast<const uint32_t*>(sc + s_off[mt][h]));
        } else {
          const uint8_t* ss = sc + s_off[mt][h];
          f.fs[mt][h] = p.scale_ue8m0 ? ue8m0_f32_dev(__ldg(ss)) : __ldg(reinterpret_cast<const float*>(ss));
        }
      }
#pragma unroll
    for (int j = 0; j < 4; ++j)
      f.act[j] = a_ok ? __ldg(reinterpret_cast<const uint4*>(a_src + static_cast<int64_t>(c) * 256 + 16 * j)) : make_uint4(0, 0, 0, 0);
  };

  float acc[MW][4];
#pragma unroll
  for (int mt = 0; mt < MW; ++mt)
#pragma unroll
    for (int i = 0; i < 4; ++i) acc[mt][i] = 0.f;

  auto compute = [&](const Frag& f) {
    // Activation (B) fragments in the weights' k-slot order (see expert_gemm_stream_kernel.cuh):
    // MXFP4 word j feeds two MMAs with pairs (0,4),(1,5) and (2,6),(3,7) of its 8 k values;
    // FP8 word j (4 k values) feeds one MMA with pairs (0,2),(1,3).
    uint32_t bf[8][2];
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const uint4 x = f.act[j];
      if constexpr (FMT == kMxfp4) {
        bf[2 * j][0] = __byte_perm(x.x, x.z, 0x5410);
        bf[2 * j][1] = __byte_perm(x.x, x.z, 0x7632);
        bf[2 * j + 1][0] = __byte_perm(x.y, x.w, 0x5410);
        bf[2 * j + 1][1] = __byte_perm(x.y, x.w, 0x7632);
      } else {
        bf[2 * j][0] = __byte_perm(x.x, x.y, 0x5410);
        bf[2 * j][1] = __byte_perm(x.x, x.y, 0x7632);
        bf[2 * j + 1][0] = __byte_perm(x.z, x.w, 0x5410);
        bf[2 * j + 1][1] = __byte_perm(x.z, x.w, 0x7632);
      }
    }
    if constexpr (FMT == kMxfp4) {
      // UE8M0 s of the lane's block (byte q of the row's word): the unpacked values are
      // code * 2^-126, so the factor is 2^(s-1), one exact bf16 multiplier while s <= 128
      // (bf16x2 bits (s + 126) << 7 in both halves: one byte permute and one IMAD). Scales with
      // the top bit set anywhere in the warp's words (s >= 128; real checkpoints have none) take
      // two multipliers (2^126 * 2^(s-127); 255 = NaN), chosen per warp and chunk.
      uint32_t topbits = 0;
#pragma unroll
      for (int mt = 0; mt < MW; ++mt) topbits |= (f.s[mt][0] | f.s[mt][1]) & 0x80808080u;
      const uint32_t sel = 0x4040u | static_cast<uint32_t>(q) | (static_cast<uint32_t>(q) << 8);
      auto body = [&](auto two_c) {
        constexpr bool kTwo = decltype(two_c)::value;
#pragma unroll
        for (int mt = 0; mt < MW; ++mt) {
          uint32_t m1[2], m2[2];
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            if constexpr (!kTwo) {
              m1[h] = __byte_perm(f.s[mt][h], 0u, sel) * 128u + 0x3F003F00u;
              m2[h] = 0u;
            } else {
              const uint32_t s = (f.s[mt][h] >> (8 * q)) & 0xFFu;
              const uint32_t a = s <= 128u ? (s + 126u) << 7 : (s == 255u ? 0x7FC0u : 0x7E80u);
              const uint32_t b = (s <= 128u || s == 255u) ? 0x3F80u : s << 7;
              m1[h] = a | (a << 16);
              m2[h] = b | (b << 16);
            }
          }
          const uint32_t wa[4] = {f.w[mt][0][0].x, f.w[mt][0][0].y, f.w[mt][0][0].z, f.w[mt][0][0].w};
          const uint32_t wb[4] = {f.w[mt][1][0].x, f.w[mt][1][0].y, f.w[mt][1][0].z, f.w[mt][1][0].w};
#pragma unroll
          for (int j = 0; j < 4; ++j) {
            uint32_t pa[4], pb[4];
            e2m1x8_bf16(wa[j], pa);
            e2m1x8_bf16(wb[j], pb);
#pragma unroll
            for (int i = 0; i < 4; ++i) {
              pa[i] = bmul2(pa[i], m1[0]);
              pb[i] = bmul2(pb[i], m1[1]);
              if constexpr (kTwo) {
                pa[i] = bmul2(pa[i], m2[0]);
                pb[i] = bmul2(pb[i], m2[1]);
              }
            }
            mma_bf16(acc[mt], pa[0], pb[0], pa[1], pb[1], bf[2 * j][0], bf[2 * j][1]);
            mma_bf16(acc[mt], pa[2], pb[2], pa[3], pb[3], bf[2 * j + 1][0], bf[2 * j + 1][1]);
          }
        }
      };
      if (__any_sync(0xffffffffu, topbits != 0u))
        body(std::true_type{});
      else
        body(std::false_type{});
    } else {
      // FP8: e4m3 -> bf16 bits times 2^-120, times 2^120 (exact); the block scale multiplies the
      // chunk's fp32 partial sums (rows g and g + 8 may lie in different 128-row blocks: SwiGLU).
      constexpr uint32_t k2p120 = 0x7B807B80u;
#pragma unroll
      for (int mt = 0; mt < MW; ++mt) {
        const uint32_t wa[8] = {f.w[mt][0][0].x, f.w[mt][0][0].y, f.w[mt][0][0].z, f.w[mt][0][0].w,
                                f.w[mt][0][1].x, f.w[mt][0][1].y, f.w[mt][0][1].z, f.w[mt][0][1].w};
        const uint32_t wb[8] = {f.w[mt][1][0].x, f.w[mt][1][0].y, f.w[mt][1][0].z, f.w[mt][1][0].w,
                                f.w[mt][1][1].x, f.w[mt][1][1].y, f.w[mt][1][1].z, f.w[mt][1][1].w};
        float part[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
        for (int j = 0; j < 8; ++j) {
          const uint32_t a0 = bmul2(e4m3_pair02(wa[j]), k2p120), a1 = bmul2(e4m3_pair02(wb[j]), k2p120);
          const uint32_t a2 = bmul2(e4m3_pair13(wa[j]), k2p120), a3 = bmul2(e4m3_pair13(wb[j]), k2p120);
          mma_bf16(part, a0, a1, a2, a3, bf[j][0], bf[j][1]);
        }
        acc[mt][0] = fmaf(part[0], f.fs[mt][0], acc[mt][0]);
        acc[mt][1] = fmaf(part[1], f.fs[mt][0], acc[mt][1]);
        acc[mt][2] = fmaf(part[2], f.fs[mt][1], acc[mt][2]);
        acc[mt][3] = fmaf(part[3], f.fs[mt][1], acc[mt][3]);
      }
    }
  };

  // ---- k walk: a ring of D register sets; chunk c + D - 1's loads are issued before chunk c is
  // unpacked (the ring index is a compile-time constant in the unrolled inner loop) ----
  {
    Frag f[D];
#pragma unroll
    for (int i = 0; i < D - 1; ++i)
      if (c_lo + i < c_hi) fetch(c_lo + i, f[i]);
    for (int c = c_lo; c < c_hi; c += D) {
#pragma unroll
      for (int i = 0; i < D; ++i) {
        if (c + i >= c_hi) break;
        if (c + i + D - 1 < c_hi) fetch(c + i + D - 1, f[(i + D - 1) % D]);
        compute(f[i]);
      }
    }
  }

  // ---- the WK k-parts of each row group, added in the order ks = 0, 1, ... ----
  if constexpr (WK > 1) {
    constexpr int NACC = MW * 4;
    if (ks > 0) {
      float* dst = red + (((ks - 1) * WR + wr) * 32 + lane) * NACC;
#pragma unroll
      for (int mt = 0; mt < MW; ++mt)
#pragma unroll
        for (int i = 0; i < 4; ++i) dst[mt * 4 + i] = acc[mt][i];
    }
    __syncthreads();
    if (ks == 0) {
#pragma unroll
      for (int s = 1; s < WK; ++s) {
        const float* src = red + (((s - 1) * WR + wr) * 32 + lane) * NACC;
#pragma unroll
        for (int mt = 0; mt < MW; ++mt)
#pragma unroll
          for (int i = 0; i < 4; ++i) acc[mt][i] += src[mt * 4 + i];
      }
    }
    __syncthreads();  // red is free again for the CTA's next tile
  }

  if (p.splits > 1) {  // split-K: fp32 partials by weight row, then the tile's last CTA reduces
    if (ks == 0) {
#pragma unroll
      for (int j = 0; j < 2; ++j) {
        const int64_t row = m0 + 2 * q + j;
        if (row >= p.rows) continue;
#pragma unroll
        for (int mt = 0; mt < MW; ++mt)
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            const int r = (wr * MW + mt) * 16 + g + 8 * h;
            if (wrow_ok(r)) splitk_store(p, row, wrow(r), acc[mt][2 * h + j]);
          }
      }
    }
    if (p.swiglu)
      splitk_finish<NT>(p, m0, C::BT, cbase, BN / 2);
    else
      splitk_finish<NT>(p, m0, C::BT, nbase, BN);
    return;
  }
  if (ks != 0) return;  // (returns from this tile only)

  // ---- epilogue: accumulator (weight row, token) -> out[token][column], this expert's rows only ----
#pragma unroll
  for (int j = 0; j < 2; ++j) {
    const int64_t row = m0 + 2 * q + j;
    if (row >= p.rows || (p.m_indices && p.m_indices[row] != e)) continue;
#pragma unroll
    for (int mt = 0; mt < MW; ++mt) {
      const int r0 = (wr * MW + mt) * 16 + g;
      if (!p.swiglu) {
        if (nbase + r0 < N) store_out(p, row, nbase + r0, acc[mt][j]);
        if (nbase + r0 + 8 < N) store_out(p, row, nbase + r0 + 8, acc[mt][2 + j]);
      } else {
        const int col = out_col(r0);
        if (col < half_n) store_out(p, row, col, swiglu_dev(acc[mt][j], acc[mt][2 + j], p.limit));
      }
    }
  }
}

// The kernel: CTA x takes layout rows [x * seg_rows, (x + 1) * seg_rows) (grouped: one aligned
// segment of <= 256 rows, so ~one CTA per used expert and column block instead of one per 8 rows,
// most of which would be padding at decode; dense: 8 rows) and walks its 8-row tiles that hold
// rows of an expert (each tile's expert is read separately, so a segment that is not one
// expert's, e.g. a caller's m_alignment larger than the layout's, is still computed right). A
// CTA with no such tile exits at once. Dense split-K calls have one tile per CTA.
template <int FMT, int MW, int WR, int WK, int D>
__global__ void __launch_bounds__(32 * WR * WK, (GemvCfg<FMT, MW, WR, WK, D>::kMinBlocks)) expert_gemm_gemv_kernel(const Args p) {
  prefetch_dense_weights<GemvCfg<FMT, MW, WR, WK, D>::BN>(p, FMT == kMxfp4 ? 64 : 128);
  pdl::entry();
  __shared__ float red[(WK > 1 ? WK - 1 : 1) * WR * 32 * MW * 4];  // partial sums of warps ks >= 1
  const int lane = threadIdx.x & 31;
  const int64_t mseg = static_cast<int64_t>(blockIdx.x) * p.seg_rows;
  // Lane i looks at tile i of the segment; every warp computes the same mask (CTA-uniform loop).
  int my_e = -1;
  if (lane < p.seg_rows / 8 && mseg + 8 * lane < p.rows) my_e = p.m_indices ? p.m_indices[mseg + 8 * lane] : 0;
  unsigned mask = __ballot_sync(0xffffffffu, my_e >= 0 && my_e < p.E);
  while (mask) {
    const int t = __ffs(mask) - 1;
    mask &= mask - 1;
    const int e = __shfl_sync(0xffffffffu, my_e, t);
    gemv_tile<FMT, MW, WR, WK, D>(p, mseg + 8 * t, e, red);
  }
}

// Host-side launch of one configuration (defined in the format's .cu). Returns false (nothing
// launched) when a split grid has more output tiles than a.num_counters. No shared-memory limit
// applies (the reduction buffer is static, <= 12 KB; FP8 scales are read per chunk, not tabled),
// so any K the interface accepts runs.
template <int FMT, int MW, int WR, int WK, int D>
bool launch_gemv(const Args& args) {
  const Args a = with_split_defaults(args);
  using C = GemvCfg<FMT, MW, WR, WK, D>;
  // The kernel's 32-bit row offsets: one expert's weights must span < 4 GiB (V4-Pro gate/up:
  // 6144 x 3584 bytes of MXFP4 = 22 MB); larger experts run the stream kernel's tactic 3.
  const int64_t wrow_bytes = FMT == kMxfp4 ? a.K / 2 : a.K;
  if (static_cast<int64_t>(a.N) * wrow_bytes >= (int64_t{1} << 32))
    return FMT == kMxfp4 ? launch_stream_mxfp4(a, 3) : launch_stream_fp8(a, 3);
  const int ncols = a.swiglu ? a.N / 2 : a.N;
  const int bn_out = a.swiglu ? C::BN / 2 : C::BN;
  // Rows per CTA: grouped calls one segment of the layout's alignment (multiples of 16; capped at
  // 256 = 32 tiles, one per lane of the tile scan), dense calls (and split-K, dense only) 8.
  Args b = a;
  b.seg_rows = a.m_indices && a.splits <= 1 ? std::min(std::max(a.m_align / 8 * 8, C::BT), 256) : C::BT;
  dim3 grid(static_cast<unsigned>((b.rows + b.seg_rows - 1) / b.seg_rows), static_cast<unsigned>((ncols + bn_out - 1) / bn_out),
            static_cast<unsigned>(b.splits));
  if (b.splits > 1 && static_cast<int64_t>(grid.x) * grid.y > b.num_counters) return false;
  pdl::launch(expert_gemm_gemv_kernel<FMT, MW, WR, WK, D>, grid, C::kThreads, 0, DSA_CURRENT_STREAM, b);
  return true;
}

}  // namespace dsa::ops::cuda::egemm
