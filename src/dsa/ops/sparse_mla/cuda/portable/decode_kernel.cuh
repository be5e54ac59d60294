// Portable sparse-MLA decode kernel (mma.sync bf16, cp.async; no wgmma, < 99 KB shared memory),
// shared by the fp8_ds_mla and MODEL1 instantiations. Runs on SM89+ (SM90 and SM120 alike).
//
// What one CTA computes: query token t, HPC consecutive heads (16 or 32), one split (a
// contiguous range of 32-key tiles) of the token's key list = main list ++ extra list.
// Launch shape: grid (T, H / HPC, splits), block 4 * HPC / 16 warps.
//
// Warp w works on head group hg = w / 4 (16 heads = the MMA M dimension) and quarter qq = w % 4:
//  - QK: partial scores over d_qk quarter qq for all 32 keys of the tile (Q fragments of that
//    quarter stay in registers for the whole kernel; K via ldmatrix from the bf16 tile).
//  - The four partials of a head group are summed through shared memory, so every warp of the
//    group sees identical scores; each warp then runs the same online softmax (exp2 domain).
//  - PV: the probabilities are re-packed from the accumulator layout straight into A fragments
//    (no shared-memory round trip) and multiplied with V columns [128 qq, 128 qq + 128) of the
//    same bf16 tile (V = the first 512 values of the key row), read with ldmatrix.trans.
// Every key is gathered and dequantized once per CTA and shared by its HPC heads.
//
// Pipeline per 32-key tile i (one raw staging buffer, one bf16 tile):
//   wait cp.async(i); sync A; slots for tile i+1; dequantize raw(i) -> bf16 tile (fp32 math,
//   e4m3 -> f16x2 hardware conversion, times scale, round to bf16: exact for power-of-two
//   scales); sync B; issue cp.async gathers of tile i+1 (16-byte chunks, L2 only) so that they
//   overlap QK(i) + PV(i); QK(i); sync C; softmax + PV(i).
// Unusable keys (p >= length, index < 0, slot >= num_slots) are never loaded; their bf16 rows are
// zeroed and their scores set to -inf.
//
// Output: splits == 1 -> final o (bf16, sink applied) and lse; else fp32 partials normalised by
// their own sum plus their lse, merged by the combine kernel.
#pragma once
#include "dsa/core/pdl.cuh"
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include "dsa/core/cuda_stream.h"

#include <cstdint>

#include "dsa/ops/sparse_mla/cuda/portable/kernel_args.h"

namespace dsa::ops::sparse_mla_cuda {

namespace dev {

__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ void cp_async16(void* dst, const void* src) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(smem_addr(dst)), "l"(src));
}
__device__ __forceinline__ void cp_async8(void* dst, const void* src) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 8;\n" ::"r"(smem_addr(dst)), "l"(src));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
__device__ __forceinline__ void cp_async_wait_all() { asm volatile("cp.async.wait_group 0;\n" ::: "memory"); }

__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(p)));
}
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(p)));
}
// D = A(16x16 bf16, row) * B(16x8 bf16, col) + D, fp32 accumulate.
__device__ __forceinline__ void mma_bf16(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
__device__ __forceinline__ uint32_t pack_bf16(float lo, float hi) {
  __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<uint32_t*>(&v);
}
// Four e4m3 bytes (little-endian in w) times scale -> two bf16x2 words.
__device__ __forceinline__ void dequant4(uint32_t w, float scale, uint32_t& out0, uint32_t& out1) {
  __half2_raw h0 = __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(w & 0xFFFFu), __NV_E4M3);
  __half2_raw h1 = __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(w >> 16), __NV_E4M3);
  float2 f0 = __half22float2(__half2(h0));
  float2 f1 = __half22float2(__half2(h1));
  out0 = pack_bf16(f0.x * scale, f0.y * scale);
  out1 = pack_bf16(f1.x * scale, f1.y * scale);
}

}  // namespace dev

template <class G, bool kModel1, int HPC>
__global__ void __launch_bounds__(HPC / 16 * 4 * 32, 1) sparse_mla_decode_kernel(const DecodeArgs a) {
  pdl::entry();
  constexpr int NK = kKeysPerTile;
  constexpr int NW = HPC / 16 * 4;
  constexpr int NT = NW * 32;
  constexpr int D = G::D;
  constexpr int KROW = G::KROW;
  constexpr int DQ = D / 4;           // d_qk quarter per warp (144 or 128)
  constexpr int KSTEPS = DQ / 16;     // 9 or 8
  constexpr int SROW = spart_row();
  constexpr float kLn2 = 0.69314718055994531f;
  constexpr float kLog2e = 1.44269504088896341f;

  extern __shared__ __align__(128) uint8_t smem[];
  uint16_t* kbf = reinterpret_cast<uint16_t*>(smem);
  uint8_t* raw = smem + NK * KROW * 2;
  float* spart = reinterpret_cast<float*>(raw + NK * G::RAW_STRIDE);
  int* slot_s = reinterpret_cast<int*>(spart + (HPC / 16) * 4 * 16 * SROW);  // [2][NK]
  int* which_s = slot_s + 2 * NK;                                             // [2][NK]

  const int t = blockIdx.x;
  const int split = blockIdx.z;
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int hg = warp >> 2, qq = warp & 3;
  const int g = lane >> 2, c = lane & 3;
  const int head0 = blockIdx.y * HPC + hg * 16;

  // This token's key range and this split's tiles.
  int len0 = a.idx_k[0];
  if (a.len[0]) len0 = min(max(a.len[0][t], 0), a.idx_k[0]);
  int len1 = 0;
  if (a.idx[1]) {
    len1 = a.idx_k[1];
    if (a.len[1]) len1 = min(max(a.len[1][t], 0), a.idx_k[1]);
  }
  const int total = len0 + len1;
  const int ntiles = (total + NK - 1) / NK;
  const int tps = (ntiles + a.splits - 1) / a.splits;
  const int tile0 = split * tps;
  const int nt = max(0, min(ntiles, tile0 + tps) - tile0);

  // Q fragments of this warp's d_qk quarter (A operand, row-major 16 x DQ).
  uint32_t qf[KSTEPS][4];
  {
    const uint16_t* q0 = a.q + (static_cast<int64_t>(t) * a.H + head0 + g) * D + qq * DQ + 2 * c;
    const uint16_t* q1 = q0 + 8 * D;
#pragma unroll
    for (int ks = 0; ks < KSTEPS; ++ks) {
      qf[ks][0] = *reinterpret_cast<const uint32_t*>(q0 + ks * 16);
      qf[ks][1] = *reinterpret_cast<const uint32_t*>(q1 + ks * 16);
      qf[ks][2] = *reinterpret_cast<const uint32_t*>(q0 + ks * 16 + 8);
      qf[ks][3] = *reinterpret_cast<const uint32_t*>(q1 + ks * 16 + 8);
    }
  }

  float oacc[16][4];
#pragma unroll
  for (int n = 0; n < 16; ++n) oacc[n][0] = oacc[n][1] = oacc[n][2] = oacc[n][3] = 0.f;
  float m_r[2] = {-INFINITY, -INFINITY}, l_r[2] = {0.f, 0.f};

  // Slot of key k of tile `tile` (relative to this split) -> slot_s/which_s[buf].
  auto compute_slots = [&](int tile, int buf) {
    if (tid < NK) {
      const int p = (tile0 + tile) * NK + tid;
      int slot = -1, w = 0;
      if (p < total) {
        int idx;
        if (p < len0) {
          idx = a.idx[0][static_cast<int64_t>(t) * a.idx_k[0] + p];
        } else {
          w = 1;
          idx = a.idx[1][static_cast<int64_t>(t) * a.idx_k[1] + (p - len0)];
        }
        if (idx >= 0 && idx < a.num_slots[w]) slot = idx;
      }
      slot_s[buf * NK + tid] = slot;
      which_s[buf * NK + tid] = w;
    }
  };
  // Gathers the raw bytes of the usable keys of slot buffer `buf` into the staging tile.
  auto issue_loads = [&](int buf) {
    constexpr int CHUNKS = kModel1 ? 37 : 41;  // 16-byte pieces per key (MODEL1: 36 + one 8-byte)
    for (int it = tid; it < NK * CHUNKS; it += NT) {
      const int key = it / CHUNKS, ch = it - key * CHUNKS;
      const int slot = slot_s[buf * NK + key];
      if (slot < 0) continue;
      const int w = which_s[buf * NK + key];
      uint8_t* dst = raw + key * G::RAW_STRIDE + ch * 16;
      if constexpr (!kModel1) {
        dev::cp_async16(dst, a.cache[w] + static_cast<int64_t>(slot) * 656 + ch * 16);
      } else {
        const int64_t page = slot >> a.page_shift[w];
        const int in_page = slot & ((1 << a.page_shift[w]) - 1);
        const uint8_t* pg = a.cache[w] + page * a.page_bytes[w];
        if (ch < 36)
          dev::cp_async16(dst, pg + in_page * 576 + ch * 16);
        else
          dev::cp_async8(dst, pg + (static_cast<int64_t>(1) << a.page_shift[w]) * 576 + in_page * 8);
      }
    }
    dev::cp_async_commit();
  };

  if (nt > 0) {
    compute_slots(0, 0);
    __syncthreads();
    issue_loads(0);
  }

  for (int i = 0; i < nt; ++i) {
    const int buf = i & 1;
    dev::cp_async_wait_all();
    __syncthreads();  // A: raw(i) landed for all threads; everyone is done with tile i-1
    if (i + 1 < nt) compute_slots(i + 1, buf ^ 1);

    // Dequantize raw(i) -> bf16 tile.
    for (int it = tid; it < NK * G::ITEMS; it += NT) {
      const int key = it / G::ITEMS, ch = it - key * G::ITEMS;
      uint16_t* dst_row = kbf + key * KROW;
      const uint8_t* src_row = raw + key * G::RAW_STRIDE;
      const bool ok = slot_s[buf * NK + key] >= 0;
      if (ch < G::NOPE_CHUNKS) {
        uint4 o0 = make_uint4(0, 0, 0, 0), o1 = o0;
        if (ok) {
          const uint4 v = *reinterpret_cast<const uint4*>(src_row + ch * 16);
          float scale;
          if constexpr (!kModel1) {
            scale = *reinterpret_cast<const float*>(src_row + 512 + 4 * (ch >> 3));
          } else {
            scale = __uint_as_float(static_cast<uint32_t>(src_row[576 + (ch >> 2)]) << 23);
            if (src_row[576 + (ch >> 2)] == 0) scale = __uint_as_float(0x00400000u);  // 2^-127
          }
          dev::dequant4(v.x, scale, o0.x, o0.y);
          dev::dequant4(v.y, scale, o0.z, o0.w);
          dev::dequant4(v.z, scale, o1.x, o1.y);
          dev::dequant4(v.w, scale, o1.z, o1.w);
        }
        *reinterpret_cast<uint4*>(dst_row + ch * 16) = o0;
        *reinterpret_cast<uint4*>(dst_row + ch * 16 + 8) = o1;
      } else {
        const int r = ch - G::NOPE_CHUNKS;
        uint4 v = make_uint4(0, 0, 0, 0);
        if (ok) v = *reinterpret_cast<const uint4*>(src_row + G::ROPE_RAW + r * 16);
        *reinterpret_cast<uint4*>(dst_row + G::NOPE_CHUNKS * 16 + r * 8) = v;
      }
    }
    __syncthreads();  // B: bf16 tile ready, raw buffer free
    if (i + 1 < nt) issue_loads(buf ^ 1);

    // QK over this warp's quarter of d_qk: S[16 heads][32 keys].
    float sacc[4][4];
#pragma unroll
    for (int n = 0; n < 4; ++n) sacc[n][0] = sacc[n][1] = sacc[n][2] = sacc[n][3] = 0.f;
#pragma unroll
    for (int ks = 0; ks < KSTEPS; ++ks) {
      const int d0 = qq * DQ + ks * 16 + ((lane >> 3) & 1) * 8;
#pragma unroll
      for (int np = 0; np < 2; ++np) {
        uint32_t b[4];
        dev::ldmatrix_x4(b, kbf + (np * 16 + (lane & 7) + (lane >> 4) * 8) * KROW + d0);
        dev::mma_bf16(sacc[2 * np], qf[ks], b[0], b[1]);
        dev::mma_bf16(sacc[2 * np + 1], qf[ks], b[2], b[3]);
      }
    }
    {
      float* sp = spart + ((hg * 4 + qq) * 16) * SROW;
#pragma unroll
      for (int n = 0; n < 4; ++n) {
        *reinterpret_cast<float2*>(sp + g * SROW + n * 8 + 2 * c) = make_float2(sacc[n][0], sacc[n][1]);
        *reinterpret_cast<float2*>(sp + (g + 8) * SROW + n * 8 + 2 * c) = make_float2(sacc[n][2], sacc[n][3]);
      }
    }
    __syncthreads();  // C: partial scores of all quarters visible

    // Full scores (same summation order in all four warps of the group), mask, online softmax.
    float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
    for (int n = 0; n < 4; ++n) {
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const int row = g + (j >> 1) * 8, col = n * 8 + 2 * c + (j & 1);
        float s = 0.f;
#pragma unroll
        for (int w = 0; w < 4; ++w) s += spart[((hg * 4 + w) * 16 + row) * SROW + col];
        s = slot_s[buf * NK + col] >= 0 ? s * a.scale_log2 : -INFINITY;
        sacc[n][j] = s;
        mx[j >> 1] = fmaxf(mx[j >> 1], s);
      }
    }
    float alpha[2], mu[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 1));
      mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 2));
      const float m_new = fmaxf(m_r[r], mx[r]);
      alpha[r] = m_new == -INFINITY ? 1.f : exp2f(m_r[r] - m_new);
      mu[r] = m_new == -INFINITY ? 0.f : m_new;
      m_r[r] = m_new;
      l_r[r] *= alpha[r];
    }
#pragma unroll
    for (int n = 0; n < 16; ++n) {
      oacc[n][0] *= alpha[0];
      oacc[n][1] *= alpha[0];
      oacc[n][2] *= alpha[1];
      oacc[n][3] *= alpha[1];
    }
    uint32_t pa[2][4];
#pragma unroll
    for (int n = 0; n < 4; ++n) {
      const float p0 = exp2f(sacc[n][0] - mu[0]), p1 = exp2f(sacc[n][1] - mu[0]);
      const float p2 = exp2f(sacc[n][2] - mu[1]), p3 = exp2f(sacc[n][3] - mu[1]);
      l_r[0] += p0 + p1;
      l_r[1] += p2 + p3;
      pa[n >> 1][(n & 1) * 2 + 0] = dev::pack_bf16(p0, p1);
      pa[n >> 1][(n & 1) * 2 + 1] = dev::pack_bf16(p2, p3);
    }

    // PV: O[16][128 columns of quarter qq] += P[16][32] V[32][cols].
#pragma unroll
    for (int kk = 0; kk < 2; ++kk) {
      const uint16_t* vrow = kbf + (kk * 16 + (lane & 7) + ((lane >> 3) & 1) * 8) * KROW + qq * 128 + (lane >> 4) * 8;
#pragma unroll
      for (int np = 0; np < 8; ++np) {
        uint32_t b[4];
        dev::ldmatrix_x4_trans(b, vrow + np * 16);
        dev::mma_bf16(oacc[2 * np], pa[kk], b[0], b[1]);
        dev::mma_bf16(oacc[2 * np + 1], pa[kk], b[2], b[3]);
      }
    }
  }

  // Epilogue: row sums across the quad, then final output or split partials.
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    l_r[r] += __shfl_xor_sync(0xffffffffu, l_r[r], 1);
    l_r[r] += __shfl_xor_sync(0xffffffffu, l_r[r], 2);
  }
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int head = head0 + g + 8 * r;
    const bool empty = m_r[r] == -INFINITY;
    const float lse = empty ? -INFINITY : (m_r[r] + log2f(l_r[r])) * kLn2;
    const int64_t th = static_cast<int64_t>(t) * a.H + head;
    if (a.splits == 1) {
      float denom = l_r[r];
      if (a.sink && !empty) denom += exp2f(a.sink[head] * kLog2e - m_r[r]);
      const float inv = empty ? 0.f : 1.f / denom;
      uint16_t* orow = a.o + th * 512 + qq * 128 + 2 * c;
#pragma unroll
      for (int n = 0; n < 16; ++n)
        *reinterpret_cast<uint32_t*>(orow + n * 8) = dev::pack_bf16(oacc[n][2 * r] * inv, oacc[n][2 * r + 1] * inv);
      if (qq == 0 && c == 0) a.lse[th] = lse;
    } else {
      const float inv = empty ? 0.f : 1.f / l_r[r];
      float* orow = a.o_part + (th * a.splits + split) * 512 + qq * 128 + 2 * c;
#pragma unroll
      for (int n = 0; n < 16; ++n)
        *reinterpret_cast<float2*>(orow + n * 8) = make_float2(oacc[n][2 * r] * inv, oacc[n][2 * r + 1] * inv);
      if (qq == 0 && c == 0) a.lse_part[th * a.splits + split] = lse;
    }
  }
}

// Launches the kernel for one cache geometry with HPC heads per CTA.
template <class G, bool kModel1, int HPC>
void launch_decode(const DecodeArgs& a, cudaStream_t stream) {
  constexpr int smem = smem_bytes<G>(HPC);
  static_assert(smem <= kMaxDynamicSmem && smem <= kSm120SmemLimit, "shared memory over the SM120 budget");
  auto kern = sparse_mla_decode_kernel<G, kModel1, HPC>;
  static unsigned attr_set = 0;  // per instantiation, one bit per device (setting twice is harmless)
  int dev = 0;
  cudaGetDevice(&dev);
  if (dev >= 32 || !(attr_set & (1u << dev))) {
    cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
    if (dev < 32) attr_set |= 1u << dev;
  }
  dim3 grid(a.T, a.H / HPC, a.splits);
  pdl::launch(kern, grid, HPC / 16 * 4 * 32, smem, DSA_STREAM_OR_CURRENT(stream), a);
}

}  // namespace dsa::ops::sparse_mla_cuda
