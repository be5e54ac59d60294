// Exhaustive tests of the scalar conversions: every e4m3, e2m1, UE8M0 code and every bf16 and f16 value,
// plus rounding checked against an independent brute-force nearest-value search.
#include <cmath>
#include <limits>
#include <vector>

#include "common/testing.h"
#include "dsa/core/dtype.h"
#include "dsa/core/dtype_conv.h"

using namespace dsa;

namespace {
// Brute force: nearest representable value among `codes`, ties to the code with even mantissa
// (even code), saturating beyond the largest finite value.
template <typename Decode>
int nearest_code(double x, const std::vector<int>& codes, Decode dec) {
  int best = -1;
  double bd = 0;
  for (int c : codes) {
    double v = dec(c);
    double d = std::fabs(v - x);
    if (best < 0 || d < bd || (d == bd && (c & 1) == 0)) {
      best = c;
      bd = d;
    }
  }
  return best;
}
}  // namespace

TEST(DType, E4M3EveryCodeRoundTrips) {
  int nan_codes = 0;
  for (int c = 0; c < 256; ++c) {
    float v = e4m3_to_f32(static_cast<uint8_t>(c));
    if ((c & 0x7F) == 0x7F) {
      EXPECT_TRUE(std::isnan(v)) << c;
      ++nan_codes;
      continue;
    }
    ASSERT_FALSE(std::isnan(v)) << c;
    EXPECT_EQ(f32_to_e4m3(v), c) << "code " << c << " value " << v;
  }
  EXPECT_EQ(nan_codes, 2);
  EXPECT_EQ(e4m3_to_f32(0x7E), 448.0f);
  EXPECT_EQ(e4m3_to_f32(0x08), std::ldexp(1.0f, -6));
  EXPECT_EQ(e4m3_to_f32(0x01), std::ldexp(1.0f, -9));
  EXPECT_EQ(e4m3_to_f32(0x38), 1.0f);
}

TEST(DType, E4M3RoundsToNearestEvenAndSaturates) {
  std::vector<int> pos;
  for (int c = 0; c <= 0x7E; ++c) pos.push_back(c);
  auto dec = [](int c) { return static_cast<double>(e4m3_to_f32(static_cast<uint8_t>(c))); };
  // Every midpoint between neighbours, and points just either side of it.
  for (int c = 0; c < 0x7E; ++c) {
    float lo = e4m3_to_f32(c), hi = e4m3_to_f32(c + 1);
    float mid = 0.5f * (lo + hi);
    EXPECT_EQ(f32_to_e4m3(mid), (c & 1) ? c + 1 : c) << "midpoint of " << c;
    EXPECT_EQ(f32_to_e4m3(std::nextafter(mid, 0.f)), c);
    EXPECT_EQ(f32_to_e4m3(std::nextafter(mid, 1000.f)), c + 1);
    EXPECT_EQ(f32_to_e4m3(-mid), 0x80 | ((c & 1) ? c + 1 : c));
  }
  test::Rng rng;
  for (int i = 0; i < 200000; ++i) {
    float x = rng.normal(0.f, 64.f) * std::ldexp(1.0f, static_cast<int>(rng.randint(-12, 2)));
    int want = nearest_code(std::fabs(x), pos, dec) | (std::signbit(x) ? 0x80 : 0);
    ASSERT_EQ(f32_to_e4m3(x), want) << "x=" << x;
  }
  EXPECT_EQ(f32_to_e4m3(449.f), 0x7E);
  EXPECT_EQ(f32_to_e4m3(1e9f), 0x7E);
  EXPECT_EQ(f32_to_e4m3(std::numeric_limits<float>::infinity()), 0x7E);
  EXPECT_EQ(f32_to_e4m3(-std::numeric_limits<float>::infinity()), 0xFE);
  EXPECT_TRUE(std::isnan(e4m3_to_f32(f32_to_e4m3(std::nanf("")))));
  EXPECT_EQ(f32_to_e4m3(1e-30f), 0x00);
  EXPECT_EQ(f32_to_e4m3(-0.0f), 0x80);
}

TEST(DType, Bf16EveryValueRoundTrips) {
  for (uint32_t b = 0; b < 65536; ++b) {
    float v = bf16_bits_to_f32(static_cast<uint16_t>(b));
    if (std::isnan(v)) {
      EXPECT_TRUE(std::isnan(bf16_bits_to_f32(f32_to_bf16_bits(v))));
      continue;
    }
    ASSERT_EQ(f32_to_bf16_bits(v), b) << b;
  }
}

TEST(DType, Bf16RoundsToNearestEven) {
  test::Rng rng;
  for (int i = 0; i < 1000000; ++i) {
    uint32_t u = static_cast<uint32_t>(rng.gen()());
    float x = f32_from_bits(u);
    if (std::isnan(x)) continue;
    uint16_t lo = static_cast<uint16_t>(u >> 16);  // truncation toward zero in magnitude
    uint16_t hi = static_cast<uint16_t>(lo + 1);
    double dl = std::fabs(static_cast<double>(bf16_bits_to_f32(lo)) - x);
    double vh = bf16_bits_to_f32(hi);
    if (std::isinf(vh)) vh = std::copysign(std::ldexp(1.0, 128), vh);  // IEEE: overflow past the last step
    double dh = std::isnan(vh) ? INFINITY : std::fabs(vh - x);
    uint16_t want = dl < dh ? lo : dh < dl ? hi : ((lo & 1) ? hi : lo);
    if (std::isinf(bf16_bits_to_f32(lo)) && (lo & 0x7FFF) == 0x7F80) want = lo;
    ASSERT_EQ(f32_to_bf16_bits(x), want) << "bits 0x" << std::hex << u;
  }
  EXPECT_EQ(f32_to_bf16_bits(1.0f), 0x3F80);
  EXPECT_EQ(f32_to_bf16_bits(f32_from_bits(0x3F808000u)), 0x3F80);  // tie -> even
  EXPECT_EQ(f32_to_bf16_bits(f32_from_bits(0x3F818000u)), 0x3F82);  // tie -> even (up)
  EXPECT_EQ(f32_to_bf16_bits(3.4e38f), 0x7F80);                      // rounds to inf
}

// f16: every code decodes to sign * 2^(e-15) * (1 + m/1024) (subnormals m * 2^-24), and
// rounding of random floats equals the nearest of the two neighbouring f16 values (ties to even,
// overflow past 65504 + half a step to inf), computed in double.
double f16_reference(uint16_t h) {
  const int e = (h >> 10) & 0x1F, m = h & 0x3FF;
  const double mag = e == 0 ? std::ldexp(m, -24) : e == 31 ? (m ? NAN : INFINITY) : std::ldexp(1024 + m, e - 25);
  return (h & 0x8000) ? -mag : mag;
}

TEST(DType, F16EveryValueDecodesAndRoundTrips) {
  for (uint32_t b = 0; b < 65536; ++b) {
    const auto h = static_cast<uint16_t>(b);
    const float v = f16_bits_to_f32(h);
    const double ref = f16_reference(h);
    if (std::isnan(ref)) {
      ASSERT_TRUE(std::isnan(v)) << b;
      ASSERT_TRUE(std::isnan(f16_bits_to_f32(f32_to_f16_bits(v)))) << b;
      continue;
    }
    ASSERT_EQ(static_cast<double>(v), ref) << b;
    ASSERT_EQ(f32_to_f16_bits(v), h) << b;
  }
}

TEST(DType, F16RoundsToNearestEven) {
  test::Rng rng;
  for (int i = 0; i < 1000000; ++i) {
    // Magnitudes across the f16 range and past it (2^-30 .. 2^18), random 24-bit mantissas.
    const float x = std::ldexp(rng.uniform(1.f, 2.f), static_cast<int>(rng.randint(-30, 17))) *
                    (rng.randint(0, 1) ? -1.f : 1.f);
    const uint16_t got = f32_to_f16_bits(x);
    // Neighbours: `lo`, the largest finite f16 magnitude <= |x| (binary search), and the next code.
    const double ax = std::fabs(static_cast<double>(x));
    uint16_t a = 0, b = 0x7BFF;
    while (a < b) {
      const auto mid = static_cast<uint16_t>((a + b + 1) / 2);
      if (f16_reference(mid) <= ax) a = mid;
      else b = static_cast<uint16_t>(mid - 1);
    }
    const auto lo = static_cast<uint16_t>((std::signbit(x) ? 0x8000 : 0) | a);
    const uint16_t hi = static_cast<uint16_t>(lo + 1);
    const double vl = std::fabs(f16_reference(lo));
    const double vh = (hi & 0x7FFF) == 0x7C00 ? 65536.0 : std::fabs(f16_reference(hi));  // IEEE: overflow past the last step
    const double dl = ax - vl, dh = vh - ax;
    uint16_t want = dl < dh ? lo : dh < dl ? hi : ((lo & 1) ? hi : lo);
    ASSERT_EQ(got, want) << "x = " << x;
  }
  EXPECT_EQ(f32_to_f16_bits(1.0f), 0x3C00);
  EXPECT_EQ(f32_to_f16_bits(65504.0f), 0x7BFF);
  EXPECT_EQ(f32_to_f16_bits(65519.0f), 0x7BFF);
  EXPECT_EQ(f32_to_f16_bits(65520.0f), 0x7C00);  // tie between 65504 and the overflow step -> inf
  EXPECT_EQ(f32_to_f16_bits(std::ldexp(1.f, -25)), 0x0000);  // half the smallest subnormal: tie -> even (0)
  EXPECT_EQ(f32_to_f16_bits(std::ldexp(3.f, -25)), 0x0002);  // 1.5 steps: tie -> even (2)
}

TEST(DType, E2M1EveryCodeAndRounding) {
  const float values[8] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6};
  for (int c = 0; c < 16; ++c) {
    float v = e2m1_to_f32(static_cast<uint8_t>(c));
    EXPECT_EQ(std::fabs(v), values[c & 7]);
    EXPECT_EQ(std::signbit(v), (c & 8) != 0);
    EXPECT_EQ(f32_to_e2m1(v), c) << c;
  }
  std::vector<int> pos = {0, 1, 2, 3, 4, 5, 6, 7};
  auto dec = [](int c) { return static_cast<double>(e2m1_to_f32(static_cast<uint8_t>(c))); };
  for (int c = 0; c < 7; ++c) {
    float mid = 0.5f * (values[c] + values[c + 1]);
    EXPECT_EQ(f32_to_e2m1(mid), (c & 1) ? c + 1 : c) << "midpoint of " << c;
  }
  test::Rng rng;
  for (int i = 0; i < 100000; ++i) {
    float x = rng.uniform(-8.f, 8.f);
    int want = nearest_code(std::fabs(x), pos, dec) | (std::signbit(x) ? 8 : 0);
    ASSERT_EQ(f32_to_e2m1(x), want) << x;
  }
  EXPECT_EQ(f32_to_e2m1(100.f), 7);
  EXPECT_EQ(f32_to_e2m1(-100.f), 15);
  EXPECT_EQ(f32_to_e2m1(std::numeric_limits<float>::infinity()), 7);
}

TEST(DType, Ue8m0EveryCode) {
  for (int b = 0; b < 255; ++b) {
    float v = ue8m0_to_f32(static_cast<uint8_t>(b));
    EXPECT_EQ(v, std::ldexp(1.0f, b - 127)) << b;
    EXPECT_EQ(f32_to_ue8m0_ceil(v), b) << b;
  }
  EXPECT_TRUE(std::isnan(ue8m0_to_f32(0xFF)));
  EXPECT_EQ(f32_to_ue8m0_ceil(std::nanf("")), 0xFF);
  EXPECT_EQ(f32_to_ue8m0_ceil(0.f), 0);
  EXPECT_EQ(f32_to_ue8m0_ceil(-3.f), 0);
  EXPECT_EQ(f32_to_ue8m0_ceil(3.0f), 129);  // 3 -> 4
  EXPECT_EQ(round_scale_up_pow2(0.3f), 0.5f);
  test::Rng rng;
  for (int i = 0; i < 100000; ++i) {
    float s = std::ldexp(rng.uniform(0.5f, 1.0f), static_cast<int>(rng.randint(-120, 120)));
    uint8_t b = f32_to_ue8m0_ceil(s);
    ASSERT_GE(ue8m0_to_f32(b), s);
    ASSERT_LT(ue8m0_to_f32(b - 1), s);
  }
}

TEST(DType, NamesParse) {
  for (DType t : {DType::F32, DType::F64, DType::BF16, DType::F16, DType::E4M3, DType::E8M0, DType::FP4X2,
                  DType::I8, DType::U8, DType::I16, DType::I32, DType::I64})
    EXPECT_EQ(parse_dtype(dtype_name(t)), t);
  EXPECT_EQ(parse_dtype("F8_E4M3"), DType::E4M3);
  EXPECT_EQ(parse_dtype("F8_E8M0"), DType::E8M0);
  EXPECT_THROW(parse_dtype("F8_E5M2x"), Error);
}
