// Scalar quantization rules shared by the CPU references and the CUDA kernels of dsa/formats, so
// that both sides produce the same bytes (docs/model-reference.md §6). Only dtype_conv.h underneath:
// every function is host + device, uses IEEE fp32 division/multiplication (no fast math) and
// order-independent reductions (max), which is what makes GPU output byte-exact to the CPU.
#pragma once
#include <cstdint>

#include "dsa/core/dtype_conv.h"

namespace dsa::formats {

// Group amax is clamped to this before the scale is derived, so that an all-zero group gets a
// finite, tiny scale (never 0 or NaN). Same floor as DeepSeek's reference quantizers (act_quant /
// weight_quant clamp amax at 1e-4).
constexpr float kAmaxFloor = 1e-4f;

// How an fp32 scale is derived from amax / format max: rounded up to a power of two (reference
// quantizers, UE8M0-compatible) or kept exact.
enum class ScaleRounding : uint8_t { Pow2Ceil, Exact };

// fmaxf drops NaN operands, so a NaN element does not poison its group's scale; the NaN itself
// still quantizes to the NaN code of e4m3 (and to +-6 in e2m1, see dtype_conv.h).
DSA_HD float amax_update(float amax, float x) { return fmaxf(amax, fabsf(x)); }

// e4m3 group scale: amax / 448, rounded up to a power of two when `pow2` (reference quantizer
// of fp8_ds_mla, MODEL1, the indexer cache and UE8M0 FP8 weights), exact fp32 otherwise.
DSA_HD float e4m3_scale(float amax, bool pow2) {
  float s = fmaxf(amax, kAmaxFloor) / kE4M3Max;
  return pow2 ? round_scale_up_pow2(s) : s;
}
// The same scale as a UE8M0 exponent byte (always rounded up).
DSA_HD uint8_t e4m3_scale_ue8m0(float amax) { return f32_to_ue8m0_ceil(fmaxf(amax, kAmaxFloor) / kE4M3Max); }

// x / scale as e4m3 (saturating at 448). Division, not multiplication by a reciprocal, so that
// arbitrary fp32 scales round the same on both sides.
DSA_HD uint8_t quantize_e4m3(float x, float scale) { return f32_to_e4m3(x / scale); }
DSA_HD float dequantize_e4m3(uint8_t code, float scale) { return e4m3_to_f32(code) * scale; }

// MXFP4 block scale: amax / 6 rounded up to a power of two, as a UE8M0 byte. Clamped to at least
// 2^-126 (byte 1) so that an all-zero block has a normal, finite scale.
DSA_HD uint8_t e2m1_scale_ue8m0(float amax) {
  uint8_t b = f32_to_ue8m0_ceil(amax / kE2M1Max);
  return b == 0 ? uint8_t{1} : b;
}

}  // namespace dsa::formats
