// Dummy weight values (`--load-format dummy`): every element is a function of a per-tensor seed
// (a hash of the load seed and the tensor's name) and the element's index, so the CPU fill and
// the CUDA kernel (dummy_fill.cu) write the same bytes, and a tensor's values do not depend on
// where it lives (a view into a stacked expert buffer or a tensor of its own).
//
// Values are chosen so that a forward through many layers stays finite and routes roughly
// uniformly (a random model, not a meaningful one):
//  - E4M3 weights: sign, exponent 2^-1 or 2^0 and mantissa at random (|x| in [0.5, 2), rms ~1.21;
//    never the NaN code), with a constant power-of-two block scale that brings the weight rms to
//    about 1/sqrt(in);
//  - packed e2m1 (MXFP4) bytes: any nibble (e2m1 has no NaN), rms ~2.93, scaled the same way;
//  - UE8M0 / f32 scales: that constant;
//  - bf16 / f32: a + b * u with u uniform in [-1, 1) (a, b per tensor role: norms near 1, linear
//    weights of rms 1/sqrt(in), small biases and mixing weights), computed with one fma so that
//    host and device round identically;
//  - i32 / i64 routing tables (hash-routed experts): k consecutive experts from a random start.
#pragma once
#include <cstdint>

#include "dsa/core/dtype_conv.h"

namespace dsa::model::dummy {

enum class FillKind : uint8_t {
  E4m3,        // random finite e4m3 codes, |x| in [0.5, 2)
  Bytes,       // random bytes (packed e2m1 pairs)
  ConstByte,   // every byte = `byte` (UE8M0 scales)
  Bf16,        // bf16 of fma(b, u, a)
  F32,         // fma(b, u, a)
  RouteI32,    // row r of [rows][k]: (start(r) + j) % experts
  RouteI64,
};

struct FillRecipe {
  FillKind kind = FillKind::F32;
  float a = 0, b = 0;     // Bf16 / F32
  uint8_t byte = 0;       // ConstByte
  int32_t k = 1;          // Route*: entries per row
  int32_t experts = 1;    // Route*: experts to choose from
};

// splitmix64's finalizer: a well-mixed 64-bit value of (tensor seed, element index).
DSA_HD uint64_t element_hash(uint64_t tensor_seed, uint64_t i) {
  uint64_t x = tensor_seed + (i + 1) * 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// Uniform in [-1, 1) on a grid of 2^-23: exact in f32 on both sides.
DSA_HD float uniform_pm1(uint64_t h) { return static_cast<float>(h >> 40) * (1.0f / 8388608.0f) - 1.0f; }

DSA_HD bool is_byte_kind(FillKind k) { return k == FillKind::E4m3 || k == FillKind::Bytes || k == FillKind::ConstByte; }

// The byte kinds draw 8 bytes from one hash (the host fill computes it once per 8 bytes): byte i
// of the tensor comes from byte i % 8 of element_hash(seed, i / 8), `b`, as follows.
DSA_HD uint8_t byte_code(const FillRecipe& r, uint8_t b) {
  if (r.kind == FillKind::E4m3)  // S.EEEE.MMM, exponent field 6 or 7 (bias 7): |x| 0.5..1.875; NaN needs 15
    return static_cast<uint8_t>((b & 0x80u) | ((6u + (b & 1u)) << 3) | ((b >> 1) & 7u));
  if (r.kind == FillKind::Bytes) return b;
  return r.byte;
}

// Element i (a byte for the byte kinds, a value otherwise) written at `out` (the tensor's base).
DSA_HD void fill_element(const FillRecipe& r, uint64_t seed, int64_t i, void* out) {
  if (is_byte_kind(r.kind)) {
    const uint64_t h = element_hash(seed, static_cast<uint64_t>(i) >> 3);
    static_cast<uint8_t*>(out)[i] = byte_code(r, static_cast<uint8_t>(h >> (8 * (i & 7))));
    return;
  }
  const uint64_t h = element_hash(seed, static_cast<uint64_t>(i));
  switch (r.kind) {
    case FillKind::E4m3:
    case FillKind::Bytes:
    case FillKind::ConstByte:
      return;  // above
    case FillKind::Bf16:
      static_cast<uint16_t*>(out)[i] = f32_to_bf16_bits(fmaf(r.b, uniform_pm1(h), r.a));
      return;
    case FillKind::F32:
      static_cast<float*>(out)[i] = fmaf(r.b, uniform_pm1(h), r.a);
      return;
    case FillKind::RouteI32:
    case FillKind::RouteI64: {
      // The row's start comes from the hash of its first entry, so every entry of a row agrees.
      const int64_t row = i / r.k, j = i % r.k;
      const uint64_t start = element_hash(seed, static_cast<uint64_t>(row * r.k)) % static_cast<uint64_t>(r.experts);
      const int64_t e = static_cast<int64_t>((start + static_cast<uint64_t>(j)) % static_cast<uint64_t>(r.experts));
      if (r.kind == FillKind::RouteI32)
        static_cast<int32_t*>(out)[i] = static_cast<int32_t>(e);
      else
        static_cast<int64_t*>(out)[i] = e;
      return;
    }
  }
}

// Elements fill_element writes for a tensor of `numel` elements of `elem_bytes` bytes each.
inline int64_t fill_elements(const FillRecipe& r, int64_t numel, int64_t elem_bytes) {
  return is_byte_kind(r.kind) ? numel * elem_bytes : numel;
}

// Host: elements [lo, hi) as fill_element writes them, the byte kinds 8 bytes per hash.
inline void fill_range(const FillRecipe& r, uint64_t seed, int64_t lo, int64_t hi, void* out) {
  if (!is_byte_kind(r.kind)) {
    for (int64_t i = lo; i < hi; ++i) fill_element(r, seed, i, out);
    return;
  }
  uint8_t* p = static_cast<uint8_t*>(out);
  int64_t i = lo;
  for (; i < hi && (i & 7) != 0; ++i) fill_element(r, seed, i, out);
  for (; i + 8 <= hi; i += 8) {
    const uint64_t h = element_hash(seed, static_cast<uint64_t>(i) >> 3);
    for (int j = 0; j < 8; ++j) p[i + j] = byte_code(r, static_cast<uint8_t>(h >> (8 * j)));
  }
  for (; i < hi; ++i) fill_element(r, seed, i, out);
}

#ifdef DSA_WITH_CUDA
// dummy_fill.cu: fills n elements at `out` (device memory) on the current stream.
void launch_dummy_fill(const FillRecipe& r, uint64_t seed, int64_t n, void* out);
#endif

}  // namespace dsa::model::dummy
