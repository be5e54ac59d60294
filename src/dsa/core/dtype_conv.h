// Exact scalar conversions between fp32 and the engine's storage formats: bf16, f16, fp8 e4m3 (fn),
// fp4 e2m1 (MXFP4 value set) and UE8M0 exponent bytes. One definition serves host and device
// code, so the CPU reference and the CUDA kernels round identically. All rounding is
// round-to-nearest-even (rintf uses the default rounding mode, which is RNE on both sides).
#pragma once
#include <cstdint>
#include <cstring>
#include <cmath>

#if defined(__CUDACC__)
#define DSA_HD __host__ __device__ __forceinline__
#else
#define DSA_HD inline
#endif

namespace dsa {

DSA_HD uint32_t f32_bits(float x) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(x);
#else
  uint32_t u;
  std::memcpy(&u, &x, 4);
  return u;
#endif
}
DSA_HD float f32_from_bits(uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float x;
  std::memcpy(&x, &u, 4);
  return x;
#endif
}

// ---- bf16 ------------------------------------------------------------------------------
DSA_HD uint16_t f32_to_bf16_bits(float x) {
  uint32_t u = f32_bits(x);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<uint16_t>((u >> 16) | 0x0040u);  // quiet NaN
  u += 0x7FFFu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}
DSA_HD float bf16_bits_to_f32(uint16_t b) { return f32_from_bits(static_cast<uint32_t>(b) << 16); }
DSA_HD float round_to_bf16(float x) { return bf16_bits_to_f32(f32_to_bf16_bits(x)); }

// ---- f16 (IEEE binary16; checkpoints may store small vectors in it) -----------------------
DSA_HD float f16_bits_to_f32(uint16_t h) {  // exact
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1Fu, man = h & 0x3FFu;
  if (exp == 0x1Fu) return f32_from_bits(sign | 0x7F800000u | (man << 13));  // inf, NaN
  if (exp == 0) {                                                            // zero, subnormal: man * 2^-24
    const float v = static_cast<float>(man) * 5.9604644775390625e-8f;
    return sign ? -v : v;
  }
  return f32_from_bits(sign | ((exp + 112u) << 23) | (man << 13));
}
DSA_HD uint16_t f32_to_f16_bits(float x) {  // round to nearest even; overflow to inf
  const uint32_t u = f32_bits(x);
  const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  const uint32_t a = u & 0x7FFFFFFFu;
  if (a > 0x7F800000u) return sign | 0x7E00u;   // quiet NaN
  if (a >= 0x477FF000u) return sign | 0x7C00u;  // >= 65520 rounds past 65504
  if (a < 0x38800000u)                          // below 2^-14: subnormal grid of 2^-24 (exact scaling)
    return sign | static_cast<uint16_t>(rintf(f32_from_bits(a) * 16777216.0f));
  uint32_t r = a - 0x38000000u;  // rebias the exponent (127 -> 15)
  r += 0xFFFu + ((r >> 13) & 1u);
  return sign | static_cast<uint16_t>(r >> 13);
}

// ---- fp8 e4m3 (fn: no inf, S.1111.111 is NaN, max 448) -----------------------------------
constexpr float kE4M3Max = 448.0f;

DSA_HD uint8_t f32_to_e4m3(float x) {
  uint32_t u = f32_bits(x);
  uint8_t sign = static_cast<uint8_t>((u >> 24) & 0x80u);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return sign | 0x7Fu;  // NaN stays NaN
  float a = fabsf(x);
  if (!(a < kE4M3Max)) return sign | 0x7Eu;  // saturate (inf included) to 448
  if (a < 0.015625f) {                        // below 2^-6: subnormal grid of 2^-9
    int q = static_cast<int>(rintf(a * 512.0f));
    return sign | static_cast<uint8_t>(q);    // q == 8 is the smallest normal, code 0x08
  }
  int e = static_cast<int>((f32_bits(a) >> 23) & 0xFF) - 127;  // a is normal in fp32 here
  float m = a * f32_from_bits(static_cast<uint32_t>(127 - e) << 23);  // in [1, 2)
  int q = static_cast<int>(rintf((m - 1.0f) * 8.0f));
  if (q == 8) { q = 0; ++e; }
  int code = ((e + 7) << 3) | q;
  if (code > 0x7E) code = 0x7E;
  return sign | static_cast<uint8_t>(code);
}

DSA_HD float e4m3_to_f32(uint8_t c) {
  float sign = (c & 0x80) ? -1.0f : 1.0f;
  int e = (c >> 3) & 0xF, m = c & 7;
  if (e == 15 && m == 7) return f32_from_bits(0x7FC00000u);
  if (e == 0) return sign * static_cast<float>(m) * 0.001953125f;  // m * 2^-9
  return sign * (1.0f + static_cast<float>(m) * 0.125f) * f32_from_bits(static_cast<uint32_t>(e - 7 + 127) << 23);
}

// ---- fp4 e2m1 (values 0, 0.5, 1, 1.5, 2, 3, 4, 6 with sign; 4-bit code S.EE.M) -----------
constexpr float kE2M1Max = 6.0f;

// Saturates to +-6. e2m1 has no NaN: NaN maps to the largest magnitude with its sign, so that a
// NaN in a block is visible as an extreme value rather than as a plausible small one.
DSA_HD uint8_t f32_to_e2m1(float x) {
  uint32_t u = f32_bits(x);
  uint8_t sign = static_cast<uint8_t>((u >> 28) & 0x8u);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return sign | 0x7u;
  float a = fabsf(x);
  if (!(a < kE2M1Max)) return sign | 0x7u;
  if (a < 1.0f) return sign | static_cast<uint8_t>(static_cast<int>(rintf(a * 2.0f)));  // 0, 0.5, 1
  int e = static_cast<int>((f32_bits(a) >> 23) & 0xFF) - 127;  // 0, 1 or 2
  float m = a * f32_from_bits(static_cast<uint32_t>(127 - e) << 23);
  int q = static_cast<int>(rintf((m - 1.0f) * 2.0f));
  if (q == 2) { q = 0; ++e; }
  int code = ((e + 1) << 1) | q;
  if (code > 7) code = 7;
  return sign | static_cast<uint8_t>(code);
}

DSA_HD float e2m1_to_f32(uint8_t c) {
  const float mag[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
  float v = mag[c & 7];
  return (c & 8) ? -v : v;
}

// ---- UE8M0: one exponent byte, value 2^(b-127); 0xFF is NaN ------------------------------
DSA_HD float ue8m0_to_f32(uint8_t b) {
  if (b == 0xFF) return f32_from_bits(0x7FC00000u);
  if (b == 0) return f32_from_bits(0x00400000u);  // 2^-127 is an fp32 subnormal
  return f32_from_bits(static_cast<uint32_t>(b) << 23);
}

// The smallest UE8M0 exponent whose value is >= s (a scale rounded up to a power of two, so that
// x / scale never exceeds the format's range). s <= 0 gives 2^-127; NaN gives 0xFF; values above
// 2^127 clamp to 254 (2^127).
DSA_HD uint8_t f32_to_ue8m0_ceil(float s) {
  uint32_t u = f32_bits(s);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return 0xFF;
  if (!(s > f32_from_bits(0x00400000u))) return 0;  // <= 2^-127
  uint32_t e = (u >> 23) & 0xFF, mant = u & 0x7FFFFFu;
  if (e == 0) return 1;  // subnormal above 2^-127: round up to 2^-126
  uint32_t r = e + (mant != 0 ? 1u : 0u);
  return static_cast<uint8_t>(r > 254 ? 254 : r);
}

DSA_HD float round_scale_up_pow2(float s) { return ue8m0_to_f32(f32_to_ue8m0_ceil(s)); }

}  // namespace dsa
