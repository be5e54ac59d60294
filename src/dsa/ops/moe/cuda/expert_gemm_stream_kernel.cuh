// Decode ("weight streaming") form of the grouped expert GEMM, for few rows per expert (T <= 128
// tokens routed over 256-384 experts: 1-10 rows per used expert). Portable like the tile kernel
// (mma.sync bf16 m16n8k16, cp.async, <= 99 KB shared memory, no wgmma): one kernel for SM90 and
// SM120. Included by expert_gemm_stream_{mxfp4,fp8}.cu.
//
// What it computes: the same as expert_gemm_kernel.cuh (expert_gemm.h), for MXFP4 and FP8 weights.
//
// Why a second kernel: at decode the tile kernel is bound by integer issue (dequantization), not
// by memory. This one swaps the MMA operands: the *weights* are the 16-row A operand and the
// tokens the 8-column B operand ("swap AB"), so one MMA consumes 256 weights instead of 128
// (half the MMAs per weight byte), the tile holds 8 token rows instead of 16 (less waste at one
// row per expert), and the activation fragments, loaded and permuted once per 16 k, serve every
// weight row group of the warp (MW groups of 16 rows). The e2m1 unpacking uses one integer
// multiply to place sign and magnitude of two values at once (see e2m1x8_bf16), and the UE8M0
// scale is applied with one bf16x2 multiply when it allows (see the scale comment below).
//
// Launch shape: grid (ceil(rows / BT), ceil(N_out / BN_out), splits), 128 threads (4 warps side by
// side along N), or 256 with KSPLIT = 2 (two warps per weight row group, each taking half of every
// chunk's k; for T = 1 where only a few CTAs exist). blockIdx.z is the split-K slice of dense
// calls (Args::splits, 1 otherwise; see splitk_finish in expert_gemm_kernel.cuh): narrow dense
// layers (N = 128..2048 at T = 1..8) get 2-32 CTAs from N alone, far too few to keep 132 SMs'
// worth of loads in flight, so K is cut into slices of whole 128-k chunks. A CTA owns BT = 8 * NTT layout rows (one
// expert: segments are aligned to a multiple of 16) and BN = 64 * MW weight rows. Row tiles run
// fastest (blockIdx.x), so the CTAs of an expert with several row tiles read the same weights at
// about the same time (L2 hits). Tiles whose expert is -1 (padding) exit at once.
//
// Pipeline: as the tile kernel, K is walked in 128-wide chunks, KCH chunks per stage: each
// stage's activation tile (BT x 128 KCH bf16), raw weight tile (BN rows x 128 KCH k) and MXFP4
// scales are copied with cp.async into a ring of STAGES shared-memory stages. KCH = 2 makes each
// weight row's piece of a stage 128 bytes of MXFP4 (a whole L2 line) and halves the per-stage
// overhead (barrier, copy issue) per weight. FP8 block scales (one per 128 x 128 block) are read
// once per CTA into shared memory as fp32 before the loop (UE8M0 or fp32 in global memory: no
// conversion pass).
//
// Fragment mapping: lane (g, q) owns, per 16-row weight group, rows g and g + 8 and the 32
// consecutive k values [32q, 32q + 32) of the chunk (one MXFP4 scale block). The MMA's k slots of
// lane q are filled with its own k values in the order that dequantizes cheapest; the activation
// fragment (token g) is permuted to the same order with byte permutes, so A and B agree slot by
// slot and the products are exact bf16 x bf16 in fp32. With SwiGLU, rows 0-7 of a group are gate
// rows of output columns c..c+7 and rows 8-15 the matching up rows: a thread's accumulators for
// rows g and g + 8 are gate and up of one column, combined in the epilogue.
#pragma once
#include "dsa/core/pdl.cuh"
#include <type_traits>

#include "dsa/ops/moe/cuda/expert_gemm_kernel.cuh"

namespace dsa::ops::cuda::egemm {

template <int FMT, int MW, int NTT, int STAGES, int KSPLIT, int KCH>
struct StreamCfg {
  static_assert(FMT == kMxfp4 || FMT == kFp8, "stream kernel: MXFP4 or FP8 weights");
  static constexpr int kWarps = 4 * KSPLIT, kThreads = 32 * kWarps;
  static constexpr int BN = 4 * MW * 16;  // weight rows per CTA
  static constexpr int BT = 8 * NTT;      // layout rows (tokens) per CTA
  static constexpr int kWRow = FMT == kMxfp4 ? 64 : 128;  // weight bytes per row per 128-k chunk
  // One stage holds KCH chunks of 128 k, each as its own sub-tile (the fragment code is per chunk).
  static constexpr int kASub = BT * 256, kWSub = BN * kWRow, kSSub = FMT == kMxfp4 ? BN * 4 : 0;
  static constexpr int kABytes = kASub * KCH, kWBytes = kWSub * KCH, kSBytes = kSSub * KCH;
  static constexpr int kStage = kABytes + kWBytes + (kSBytes + 127) / 128 * 128;
  static constexpr int kPipe = kStage * STAGES;  // + FP8: BN/8 x K/128 fp32 scales (runtime)
  static_assert(kPipe <= kMaxSmem, "must fit SM120's 99 KB per block");
};

// 8 e2m1 codes of w (k order 0..7, low nibble first) -> four bf16x2 pairs (k_i, k_i+4), each value
// times 2^-126 (bits sign << 15 | code3 << 6; codes 0 and 1 land on bf16 subnormals, exactly).
// For a pair whose nibbles sit at bits [4i, 4i+4) of both halves, x * (2^a + 2^b) writes the
// nibble twice, once with the sign at bit 15 and once with the magnitude at bits 6..8 (the copies
// do not overlap, so no carries); one mask keeps the wanted bits. Two logic ops and one IMAD per
// pair (the IMAD runs on the FMA pipe, leaving the integer pipe to the masks).
__device__ __forceinline__ void e2m1x8_bf16(uint32_t w, uint32_t (&p)[4]) {
  const uint32_t h = __umulhi(w, 1u << 24);  // w >> 8
  constexpr uint32_t kKeep = 0x81C081C0u;
  p[0] = ((w & 0x000F000Fu) * 0x1040u) & kKeep;
  p[1] = ((w & 0x00F000F0u) * 0x0104u) & kKeep;
  p[2] = ((h & 0x000F000Fu) * 0x1040u) & kKeep;
  p[3] = ((h & 0x00F000F0u) * 0x0104u) & kKeep;
}

template <int FMT, int MW, int NTT, int STAGES, int KSPLIT, int KCH>
__global__ void __launch_bounds__(128 * KSPLIT) expert_gemm_stream_kernel(const Args p) {
  prefetch_dense_weights<StreamCfg<FMT, MW, NTT, STAGES, KSPLIT, KCH>::BN>(p, FMT == kMxfp4 ? 64 : 128);
  pdl::entry();
  using C = StreamCfg<FMT, MW, NTT, STAGES, KSPLIT, KCH>;
  constexpr int BN = C::BN, BT = C::BT, NT = C::kThreads;
  // Per warp and chunk: MXFP4 4 words (16 bytes) of each of its rows per lane, FP8 8 words.
  constexpr int WORDS = (FMT == kMxfp4 ? 4 : 8) / KSPLIT;
  extern __shared__ __align__(128) uint8_t smem[];

  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, q = lane & 3;
  const int wn = warp & 3, ks = warp >> 2;
  const int64_t m0 = static_cast<int64_t>(blockIdx.x) * BT;
  const int e = p.m_indices ? p.m_indices[m0] : 0;
  if (e < 0 || e >= p.E) return;  // padding tile (or out-of-range expert id)

  const int N = p.N, K = p.K, half_n = N / 2;
  // This CTA's 128-k chunks: [kc0, kc0 + nk) (the whole K unless split; a multiple of KCH).
  const int kc0 = static_cast<int>(blockIdx.z) * p.split_chunks, nk = min(K / 128 - kc0, p.split_chunks), nst = nk / KCH;
  const int nbase = static_cast<int>(blockIdx.y) * BN;  // first weight row (no SwiGLU)
  const int cbase = static_cast<int>(blockIdx.y) * (BN / 2);  // first output column (SwiGLU)
  auto out_col = [&](int r) { return cbase + (r >> 4) * 8 + (r & 7); };
  auto wrow = [&](int r) -> int {
    if (!p.swiglu) return nbase + r;
    return (r & 8) ? half_n + out_col(r) : out_col(r);
  };
  auto wrow_ok = [&](int r) { return p.swiglu ? out_col(r) < half_n : nbase + r < N; };

  // ---- per-thread copy assignments (fixed for the whole K loop) ----
  // Each copy is (shared offset, global base, bytes per stage, size): invalid sources keep a
  // valid dummy address, step 0 and size 0 (cp.async zero-fills), so the loop has no selects.
  // Activation rows that are not this expert's (padding, beyond rows) are not copied at all:
  // their MMA columns hold stale shared memory, which only reaches outputs that are never written
  // (an MMA's column n depends on column n of B alone). A valid row whose gathered source is out
  // of range is zero-filled (it is computed, with zero activations).
  constexpr int kAUnits = (BT * 16 * KCH + NT - 1) / NT;
  const __nv_bfloat16* A = static_cast<const __nv_bfloat16*>(p.a);
  const uint8_t* a_src[kAUnits];
  int a_dst[kAUnits], a_sz[kAUnits];
  uint32_t a_step[kAUnits];
#pragma unroll
  for (int i = 0; i < kAUnits; ++i) {
    const int idx = tid + i * NT, r = idx / (16 * KCH), ua = idx % (16 * KCH);
    const int64_t row = m0 + r;
    const bool mine = idx < BT * 16 * KCH && row < p.rows && (!p.m_indices || p.m_indices[row] == e);
    int64_t src = row;
    if (mine && p.a_rows) src = p.a_rows[row];
    const bool ok = mine && src >= 0 && src < p.a_nrows;
    a_src[i] = reinterpret_cast<const uint8_t*>(ok ? A + src * K + static_cast<int64_t>(kc0) * 128 + ua * 8 : A);
    a_step[i] = ok ? 256u * KCH : 0u;
    a_sz[i] = ok ? 16 : 0;
    a_dst[i] = mine ? (ua >> 4) * C::kASub + a_off(r, ua & 15) : -1;
  }
  constexpr int kUPerRow = C::kWRow / 16;
  constexpr int kWUnits = BN * kUPerRow * KCH / NT;
  static_assert(kWUnits >= 1 && BN * kUPerRow * KCH % NT == 0, "weight copy split");
  const int64_t wrow_bytes = FMT == kMxfp4 ? K / 2 : K;
  const uint8_t* w_src[kWUnits];
  uint32_t w_step[kWUnits];
  int w_dst[kWUnits], w_sz[kWUnits];
#pragma unroll
  for (int i = 0; i < kWUnits; ++i) {
    const int idx = tid + i * NT, r = idx / (kUPerRow * KCH), uw = idx % (kUPerRow * KCH);
    const bool ok = wrow_ok(r);
    w_src[i] = ok ? p.w + (static_cast<int64_t>(e) * N + wrow(r)) * wrow_bytes + static_cast<int64_t>(kc0) * C::kWRow + uw * 16 : p.w;
    w_step[i] = ok ? C::kWRow * KCH : 0u;
    w_sz[i] = ok ? 16 : 0;
    w_dst[i] = C::kABytes + (uw / kUPerRow) * C::kWSub + w_off<FMT>(r, uw % kUPerRow);
  }
  // MXFP4: per chunk one 4-byte word (4 UE8M0) per weight row.
  const bool s_ok = FMT == kMxfp4 && tid < BN && wrow_ok(tid);
  const uint8_t* s_src =
      s_ok ? static_cast<const uint8_t*>(p.scale) + (static_cast<int64_t>(e) * N + wrow(tid)) * (K / 32) + 4 * static_cast<int64_t>(kc0) : p.w;
  const uint32_t s_step = s_ok ? 4u * KCH : 0u;
  const int s_sz = s_ok ? 4 : 0;

  auto load_stage = [&](int ks_, int st) {  // stage ks_ of the k walk into ring slot st
    uint8_t* base = smem + st * C::kStage;
#pragma unroll
    for (int i = 0; i < kAUnits; ++i)
      if (a_dst[i] >= 0) cp_async16_n(base + a_dst[i], a_src[i] + static_cast<size_t>(ks_) * a_step[i], a_sz[i]);
#pragma unroll
    for (int i = 0; i < kWUnits; ++i)
      cp_async16_n(base + w_dst[i], w_src[i] + static_cast<size_t>(ks_) * w_step[i], w_sz[i]);
    if (FMT == kMxfp4 && tid < BN) {
#pragma unroll
      for (int j = 0; j < KCH; ++j)
        cp_async4_n(base + C::kABytes + C::kWBytes + j * C::kSSub + tid * 4,
                    s_src + static_cast<size_t>(ks_) * s_step + 4 * j, s_sz);
    }
  };

#pragma unroll
  for (int s = 0; s < STAGES - 1; ++s) {
    if (s < nst) load_stage(s, s);
    cp_async_commit();
  }

  // FP8 block scales of this CTA's 8-row groups for each of its chunks, as fp32 (read once; the loads
  // overlap the prologue's copies; the first __syncthreads of the loop publishes them).
  float* fscl = reinterpret_cast<float*>(smem + C::kPipe);
  if constexpr (FMT == kFp8) {
    const int NB = (N + 127) / 128;
    for (int i = tid; i < (BN / 8) * nk; i += NT) {
      const int grp = i / nk, kc = i - grp * nk;
      float v = 0.f;
      if (wrow_ok(grp * 8)) {
        const int64_t si = (static_cast<int64_t>(e) * NB + wrow(grp * 8) / 128) * (K / 128) + kc0 + kc;
        v = p.scale_ue8m0 ? ue8m0_f32_dev(static_cast<const uint8_t*>(p.scale)[si]) : static_cast<const float*>(p.scale)[si];
      }
      fscl[i] = v;
    }
  }

  float acc[MW][NTT][4];
#pragma unroll
  for (int i = 0; i < MW; ++i)
#pragma unroll
    for (int t = 0; t < NTT; ++t)
#pragma unroll
      for (int c = 0; c < 4; ++c) acc[i][t][c] = 0.f;

  // Swizzled offsets of this lane's activation units (loop-invariant; hoisted by hand).
  constexpr int AUNITS = FMT == kMxfp4 ? WORDS : WORDS / 2;
  int a_frag[NTT][AUNITS];
#pragma unroll
  for (int nt = 0; nt < NTT; ++nt)
#pragma unroll
    for (int j = 0; j < AUNITS; ++j) a_frag[nt][j] = a_off(nt * 8 + g, 4 * q + ks * AUNITS + j);

  int st_read = 0, st_write = STAGES - 1;  // ring positions (no modulo in the loop)
  for (int kst = 0; kst < nst; ++kst) {
    cp_async_wait<STAGES - 2>();
    __syncthreads();
    {
      if (kst + STAGES - 1 < nst) load_stage(kst + STAGES - 1, st_write);
      cp_async_commit();
      st_write = st_write + 1 == STAGES ? 0 : st_write + 1;
    }
    const uint8_t* stage = smem + st_read * C::kStage;
    st_read = st_read + 1 == STAGES ? 0 : st_read + 1;
#pragma unroll
   for (int sub = 0; sub < KCH; ++sub) {
    const int kc = kst * KCH + sub;  // the CTA's 128-k chunk index (FP8 scale table column)
    (void)kc;
    const uint8_t* As = stage + sub * C::kASub;
    const uint8_t* Ws = stage + C::kABytes + sub * C::kWSub;

    // Activation (B) fragments: per token tile and MMA, (b0, b1) in the weights' k-slot order.
    // MXFP4 word j of the lane (k = 32q + 8j + [0, 8)) feeds two MMAs with pairs (0,4),(1,5) and
    // (2,6),(3,7); FP8 word j (k = 32q + 4j + [0, 4)) feeds one MMA with pairs (0,2),(1,3).
    constexpr int NMMA = FMT == kMxfp4 ? 2 * WORDS : WORDS;
    uint32_t bf[NTT][NMMA][2];
#pragma unroll
    for (int nt = 0; nt < NTT; ++nt) {
      if constexpr (FMT == kMxfp4) {
#pragma unroll
        for (int j = 0; j < WORDS; ++j) {
          const uint4 x = *reinterpret_cast<const uint4*>(As + a_frag[nt][j]);
          bf[nt][2 * j][0] = __byte_perm(x.x, x.z, 0x5410);
          bf[nt][2 * j][1] = __byte_perm(x.x, x.z, 0x7632);
          bf[nt][2 * j + 1][0] = __byte_perm(x.y, x.w, 0x5410);
          bf[nt][2 * j + 1][1] = __byte_perm(x.y, x.w, 0x7632);
        }
      } else {
#pragma unroll
        for (int j = 0; j < AUNITS; ++j) {
          const uint4 x = *reinterpret_cast<const uint4*>(As + a_frag[nt][j]);
          bf[nt][2 * j][0] = __byte_perm(x.x, x.y, 0x5410);
          bf[nt][2 * j][1] = __byte_perm(x.x, x.y, 0x7632);
          bf[nt][2 * j + 1][0] = __byte_perm(x.z, x.w, 0x5410);
          bf[nt][2 * j + 1][1] = __byte_perm(x.z, x.w, 0x7632);
        }
      }
    }

    if constexpr (FMT == kMxfp4) {
      // UE8M0 scale s of rows g, g + 8 (block q): the unpacked values are code * 2^-126, so the
      // factor is 2^(s-1): one exact bf16 multiplier while s <= 128 (2^127 is the largest power
      // of two in bf16). Larger s (or s = 255, NaN) take a second multiplier; the choice is made
      // per warp and chunk (real checkpoints never need it).
      const uint8_t* Ss = stage + C::kABytes + C::kWBytes + sub * C::kSSub;
      uint32_t sc[MW][2], m1[MW][2];
      bool big = false;
#pragma unroll
      for (int mt = 0; mt < MW; ++mt)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const uint32_t s = Ss[((wn * MW + mt) * 16 + g + 8 * h) * 4 + q];
          sc[mt][h] = s;
          m1[mt][h] = (s + 126u) * 0x00800080u;  // bf16x2 of 2^(s-1) for s <= 128
          big |= s > 128u;
        }
      auto body = [&](auto two_c) {
        constexpr bool kTwo = decltype(two_c)::value;
        uint32_t m2[MW][2];
        if constexpr (kTwo) {  // m1 * m2 = 2^(s-1) in two exact steps; s = 255 gives NaN
#pragma unroll
          for (int mt = 0; mt < MW; ++mt)
#pragma unroll
            for (int h = 0; h < 2; ++h) {
              const uint32_t s = sc[mt][h];
              const uint32_t a = s <= 128u ? (s + 126u) << 7 : (s == 255u ? 0x7FC0u : 0x7E80u);
              const uint32_t b = (s <= 128u || s == 255u) ? 0x3F80u : s << 7;
              m1[mt][h] = a | (a << 16);
              m2[mt][h] = b | (b << 16);
            }
        }
#pragma unroll
        for (int mt = 0; mt < MW; ++mt) {
          const int r0 = (wn * MW + mt) * 16 + g;
          uint32_t wv[2][WORDS];
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            const uint8_t* src = Ws + (r0 + 8 * h) * 64 + q * 16 + ks * WORDS * 4;
            if constexpr (WORDS == 4) {
              const uint4 v = *reinterpret_cast<const uint4*>(src);
              wv[h][0] = v.x; wv[h][1 % WORDS] = v.y; wv[h][2 % WORDS] = v.z; wv[h][3 % WORDS] = v.w;
            } else {
              const uint2 v = *reinterpret_cast<const uint2*>(src);
              wv[h][0] = v.x; wv[h][1] = v.y;
            }
          }
#pragma unroll
          for (int j = 0; j < WORDS; ++j) {
            uint32_t pa[4], pb[4];
            e2m1x8_bf16(wv[0][j], pa);
            e2m1x8_bf16(wv[1][j], pb);
#pragma unroll
            for (int i = 0; i < 4; ++i) {
              pa[i] = bmul2(pa[i], m1[mt][0]);
              pb[i] = bmul2(pb[i], m1[mt][1]);
              if constexpr (kTwo) {
                pa[i] = bmul2(pa[i], m2[mt][0]);
                pb[i] = bmul2(pb[i], m2[mt][1]);
              }
            }
#pragma unroll
            for (int nt = 0; nt < NTT; ++nt) {
              mma_bf16(acc[mt][nt], pa[0], pb[0], pa[1], pb[1], bf[nt][2 * j][0], bf[nt][2 * j][1]);
              mma_bf16(acc[mt][nt], pa[2], pb[2], pa[3], pb[3], bf[nt][2 * j + 1][0], bf[nt][2 * j + 1][1]);
            }
          }
        }
      };
      if (__any_sync(0xffffffffu, big))
        body(std::true_type{});
      else
        body(std::false_type{});
    } else {
      // FP8: e4m3 -> bf16 bits times 2^-120, times 2^120 (exact); the block scale multiplies the
      // chunk's fp32 partial sums (one scale per 8-row group and chunk).
      constexpr uint32_t k2p120 = 0x7B807B80u;
#pragma unroll
      for (int mt = 0; mt < MW; ++mt) {
        const int r0 = (wn * MW + mt) * 16 + g;
        uint32_t wv[2][WORDS];
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          if constexpr (WORDS == 8) {
            const uint4 v0 = *reinterpret_cast<const uint4*>(Ws + w_off<FMT>(r0 + 8 * h, 2 * q));
            const uint4 v1 = *reinterpret_cast<const uint4*>(Ws + w_off<FMT>(r0 + 8 * h, 2 * q + 1));
            wv[h][0] = v0.x; wv[h][1] = v0.y; wv[h][2] = v0.z; wv[h][3] = v0.w;
            wv[h][4 % WORDS] = v1.x; wv[h][5 % WORDS] = v1.y; wv[h][6 % WORDS] = v1.z; wv[h][7 % WORDS] = v1.w;
          } else {
            const uint4 v = *reinterpret_cast<const uint4*>(Ws + w_off<FMT>(r0 + 8 * h, 2 * q + ks));
            wv[h][0] = v.x; wv[h][1] = v.y; wv[h][2] = v.z; wv[h][3] = v.w;
          }
        }
        float part[NTT][4];
#pragma unroll
        for (int nt = 0; nt < NTT; ++nt)
#pragma unroll
          for (int c = 0; c < 4; ++c) part[nt][c] = 0.f;
#pragma unroll
        for (int j = 0; j < WORDS; ++j) {
          const uint32_t a0 = bmul2(e4m3_pair02(wv[0][j]), k2p120), a1 = bmul2(e4m3_pair02(wv[1][j]), k2p120);
          const uint32_t a2 = bmul2(e4m3_pair13(wv[0][j]), k2p120), a3 = bmul2(e4m3_pair13(wv[1][j]), k2p120);
#pragma unroll
          for (int nt = 0; nt < NTT; ++nt) mma_bf16(part[nt], a0, a1, a2, a3, bf[nt][j][0], bf[nt][j][1]);
        }
        const float s0 = fscl[((wn * MW + mt) * 2) * nk + kc], s1 = fscl[((wn * MW + mt) * 2 + 1) * nk + kc];
#pragma unroll
        for (int nt = 0; nt < NTT; ++nt) {
          acc[mt][nt][0] = fmaf(part[nt][0], s0, acc[mt][nt][0]);
          acc[mt][nt][1] = fmaf(part[nt][1], s0, acc[mt][nt][1]);
          acc[mt][nt][2] = fmaf(part[nt][2], s1, acc[mt][nt][2]);
          acc[mt][nt][3] = fmaf(part[nt][3], s1, acc[mt][nt][3]);
        }
      }
    }
   }  // sub
  }
  cp_async_wait<0>();
  if constexpr (KSPLIT == 2) {  // add the k-half sums of warp pairs (wn, 1) into (wn, 0)
    constexpr int NACC = MW * NTT * 4;
    __syncthreads();  // every warp is done with the pipeline buffers
    float* red = reinterpret_cast<float*>(smem) + (wn * 32 + lane) * NACC;
    if (ks == 1) {
#pragma unroll
      for (int mt = 0; mt < MW; ++mt)
#pragma unroll
        for (int nt = 0; nt < NTT; ++nt)
#pragma unroll
          for (int c = 0; c < 4; ++c) red[(mt * NTT + nt) * 4 + c] = acc[mt][nt][c];
    }
    __syncthreads();
    if (ks == 1 && p.splits <= 1) return;  // split-K: the whole CTA reaches splitk_finish
    if (ks == 0) {
#pragma unroll
      for (int mt = 0; mt < MW; ++mt)
#pragma unroll
        for (int nt = 0; nt < NTT; ++nt)
#pragma unroll
          for (int c = 0; c < 4; ++c) acc[mt][nt][c] += red[(mt * NTT + nt) * 4 + c];
    }
  }

  if (p.splits > 1) {  // split-K: fp32 partials by weight row, then the tile's last CTA reduces
    if (ks == 0) {
#pragma unroll
      for (int nt = 0; nt < NTT; ++nt)
#pragma unroll
        for (int j = 0; j < 2; ++j) {
          const int64_t row = m0 + nt * 8 + 2 * q + j;
          if (row >= p.rows) continue;
#pragma unroll
          for (int mt = 0; mt < MW; ++mt)
#pragma unroll
            for (int h = 0; h < 2; ++h) {
              const int r = (wn * MW + mt) * 16 + g + 8 * h;
              if (wrow_ok(r)) splitk_store(p, row, wrow(r), acc[mt][nt][2 * h + j]);
            }
        }
    }
    if (p.swiglu)
      splitk_finish<NT>(p, m0, BT, cbase, BN / 2);
    else
      splitk_finish<NT>(p, m0, BT, nbase, BN);
    return;
  }

  // ---- epilogue: accumulator (weight row, token) -> out[token][column], valid rows only ----
#pragma unroll
  for (int nt = 0; nt < NTT; ++nt)
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      const int64_t row = m0 + nt * 8 + 2 * q + j;
      if (row >= p.rows || (p.m_indices && p.m_indices[row] != e)) continue;
#pragma unroll
      for (int mt = 0; mt < MW; ++mt) {
        const int r0 = (wn * MW + mt) * 16 + g;
        if (!p.swiglu) {
          if (nbase + r0 < N) store_out(p, row, nbase + r0, acc[mt][nt][j]);
          if (nbase + r0 + 8 < N) store_out(p, row, nbase + r0 + 8, acc[mt][nt][2 + j]);
        } else {
          const int col = out_col(r0);
          if (col >= half_n) continue;
          store_out(p, row, col, swiglu_dev(acc[mt][nt][j], acc[mt][nt][2 + j], p.limit));
        }
      }
    }
}

// Host-side launch of one configuration (defined in the format's .cu).
// Returns false (nothing launched) when the FP8 scale table (BN/8 x the CTA's chunks) would not
// fit in shared memory, or a split grid has more output tiles than a.num_counters.
// KCH > 1 needs K % (128 KCH) == 0 and split slices of a multiple of KCH chunks; other shapes
// run the KCH = 1 form with the same shared memory.
template <int FMT, int MW, int NTT, int STAGES, int KSPLIT = 1, int KCH = 1>
bool launch_stream(const Args& args) {
  const Args a = with_split_defaults(args);
  if constexpr (KCH > 1) {
    if (a.K % (128 * KCH) != 0 || a.split_chunks % KCH != 0) return launch_stream<FMT, MW, NTT, STAGES * KCH, KSPLIT, 1>(a);
  }
  using C = StreamCfg<FMT, MW, NTT, STAGES, KSPLIT, KCH>;
  auto kern = expert_gemm_stream_kernel<FMT, MW, NTT, STAGES, KSPLIT, KCH>;
  static const bool attr_set = [&] {  // once per instantiation (single-device assumption)
    cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, kMaxSmem);
    return true;
  }();
  (void)attr_set;
  const int smem = C::kPipe + (FMT == kFp8 ? C::BN / 8 * a.split_chunks * 4 : 0);
  if (smem > kMaxSmem) return false;
  const int ncols = a.swiglu ? a.N / 2 : a.N;
  const int bn_out = a.swiglu ? C::BN / 2 : C::BN;
  dim3 grid(static_cast<unsigned>((a.rows + C::BT - 1) / C::BT), (ncols + bn_out - 1) / bn_out, static_cast<unsigned>(a.splits));
  if (a.splits > 1 && static_cast<int64_t>(grid.x) * grid.y > a.num_counters) return false;
  pdl::launch(kern, grid, C::kThreads, smem, DSA_CURRENT_STREAM, a);
  return true;
}

}  // namespace dsa::ops::cuda::egemm
