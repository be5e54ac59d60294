// Packed UE8M0 scale layouts for DeepGEMM-style FP8/FP4 GEMMs (docs/model-reference.md §6).
//
// A UE8M0 byte is the biased exponent of a power-of-two scale (value 2^(b-127)). Four consecutive
// K-group exponents share one int32: byte j (bits 8j..8j+7) holds group 4i+j; missing groups at the
// end of K are 0. From fp32 scales the byte is the exponent rounded up: (bits >> 23) & 0xFF, plus 1
// when the mantissa is not zero (so a non-power-of-two scale becomes the next power of two;
// f32_to_ue8m0_ceil in dtype_conv.h, which also maps <= 0 to 0, NaN to 0xFF and caps at 254).
// Inputs may also be UE8M0 bytes (E8M0 or raw U8), packed as they are.
//
// Layouts (all outputs are int32, all CPU + CUDA, dispatched by the tensors' device):
//  1. pack_ue8m0: K-major, sf [..., sf_k] -> out [..., ceil(sf_k/4)].
//  2. pack_ue8m0_mn_major: the MN-major TMA-aligned layout. Logically [G][mn][packed_sf_k] with
//     strides (packed_sf_k * align(mn,4), 1, align(mn,4)), i.e. physically the contiguous tensor
//     out [G][packed_sf_k][align(mn,4)] (2-D sf [mn][sf_k] -> out [packed_sf_k][align(mn,4)]):
//     logical element (g, m, p) is out[g][p][m]. Columns m >= mn are padding and written as 0.
//     (DeepGEMM's get_mn_major_tma_aligned_packed_ue8m0_tensor; align 4 = 16 bytes for TMA.)
//  3. pack_ue8m0_k_grouped: K-grouped GEMMs (e.g. per-expert weight gradients) where group g
//     covers ks[g] values of K. sf [sum_g ceil(ks[g]/gran_k)][mn] (MN contiguous, groups' rows
//     back to back) -> out [sum_g ceil(ceil(ks[g]/gran_k)/4)][align(mn,4)]: each group packs its
//     own rows 4 at a time, its last int32 row zero-filled past the group's end, so no int32 mixes
//     two groups. Columns m >= mn are 0. What DeepGEMM's
//     get_k_grouped_mn_major_tma_aligned_packed_ue8m0_tensor(sf, ks_tensor, ks) (used by vLLM)
//     computes (deep_gemm/include/deep_gemm/impls/smxx_layout.cuh, pack_fp32_into_ue8m0), which
//     requires mn % 4 == 0; here any mn works and the row stride is align(mn, 4).
// Own implementation; the layouts follow DeepGEMM's conventions so its kernels can consume them.
#pragma once
#include <cstdint>
#include <vector>

#include "dsa/core/tensor.h"

namespace dsa::formats {

constexpr int64_t kTmaAlignInts = 4;  // 16 bytes of int32
inline int64_t tma_aligned_mn(int64_t mn) { return (mn + kTmaAlignInts - 1) / kTmaAlignInts * kTmaAlignInts; }
inline int64_t packed_sf_k(int64_t sf_k) { return (sf_k + 3) / 4; }

struct Ue8m0PackParams {
  Tensor sf;   // F32, E8M0 or U8, [..., sf_k] (1-D to 3-D), contiguous
  Tensor out;  // I32 [..., ceil(sf_k/4)], contiguous
  void* stream = nullptr;  // cudaStream_t for the CUDA path (null = default stream)
  void validate() const;   // throws dsa::Error naming the field and value
};
void pack_ue8m0(const Ue8m0PackParams& p);
void pack_ue8m0_cpu(const Ue8m0PackParams& p);

struct Ue8m0MnMajorParams {
  Tensor sf;   // F32, E8M0 or U8, [mn][sf_k] or [G][mn][sf_k], contiguous
  Tensor out;  // I32 [packed_sf_k][align(mn,4)] or [G][packed_sf_k][align(mn,4)], contiguous
  void* stream = nullptr;
  void validate() const;
};
void pack_ue8m0_mn_major(const Ue8m0MnMajorParams& p);
void pack_ue8m0_mn_major_cpu(const Ue8m0MnMajorParams& p);
Shape mn_major_packed_shape(const Shape& sf_shape);  // the `out` shape for an sf shape

struct Ue8m0KGroupedParams {
  Tensor sf;                // F32, E8M0 or U8 [sum_g ceil(ks[g]/gran_k)][mn], contiguous
  std::vector<int64_t> ks;  // K extent of each group (>= 0), on the host
  int gran_k = 128;         // K values per scale (DeepGEMM: 32 or 128)
  Tensor out;               // I32 [sum_g ceil(ceil(ks[g]/gran_k)/4)][align(mn,4)], contiguous
  void* stream = nullptr;
  void validate() const;
};
void pack_ue8m0_k_grouped(const Ue8m0KGroupedParams& p);
void pack_ue8m0_k_grouped_cpu(const Ue8m0KGroupedParams& p);
Shape k_grouped_packed_shape(const std::vector<int64_t>& ks, int gran_k, int64_t mn);
int64_t k_grouped_sf_rows(const std::vector<int64_t>& ks, int gran_k);  // rows sf must have

}  // namespace dsa::formats
