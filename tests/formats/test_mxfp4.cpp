// MXFP4 weights (mxfp4.h): nibble order, scale rule, round-trip error bound, invalid inputs,
// CUDA vs CPU.
#include <cmath>

#include "dsa/core/dtype_conv.h"
#include "dsa/formats/mxfp4.h"
#include "util.h"

using namespace dsa;
using namespace dsa::formats;
using dsa::test::Rng;

namespace {
void quantize(const Tensor& in, Tensor& q, Tensor& s) {
  Mxfp4QuantParams p;
  p.in = in;
  p.packed = q;
  p.scale = s;
  mxfp4_quantize(p);
}
void dequantize(const Tensor& q, const Tensor& s, Tensor& out) {
  Mxfp4DequantParams p;
  p.packed = q;
  p.scale = s;
  p.out = out;
  mxfp4_dequantize(p);
}
}  // namespace

TEST(Mxfp4, NibbleOrderAndScaleByte) {
  // Block amax 6 -> scale 1 (byte 127): values quantize to themselves; low nibble = even element.
  Tensor x = Tensor::zeros({1, 32}, DType::F32);
  float* v = x.data<float>();
  v[0] = 0.5f;   // code 1
  v[1] = -1.f;   // code 0xA
  v[2] = 6.f;    // code 7
  v[3] = -0.f;   // code 8 (negative zero keeps its sign bit)
  v[4] = 2.9f;   // rounds to 3: code 5
  v[5] = -4.5f;  // rounds to -4: code 0xE
  Tensor q = Tensor::empty({1, 16}, DType::I8), s = Tensor::empty({1, 1}, DType::E8M0);
  test::poison(q);
  test::poison(s);
  quantize(x, q, s);
  EXPECT_EQ(s.data<uint8_t>()[0], 127);
  EXPECT_EQ(q.data<uint8_t>()[0], 0xA1);
  EXPECT_EQ(q.data<uint8_t>()[1], 0x87);
  EXPECT_EQ(q.data<uint8_t>()[2], 0xE5);
  for (int i = 3; i < 16; ++i) EXPECT_EQ(q.data<uint8_t>()[i], 0);
  Tensor out = Tensor::empty({1, 32}, DType::F32);
  test::poison(out);
  dequantize(q, s, out);
  const float want[6] = {0.5f, -1.f, 6.f, -0.f, 3.f, -4.f};
  for (int i = 0; i < 6; ++i) EXPECT_EQ(out.data<float>()[i], want[i]) << i;
}

TEST(Mxfp4, RoundTripWithinE2m1Bound) {
  Rng rng;
  const int64_t rows = 37, cols = 320;
  Tensor x = test::random_grouped_bf16(rng, rows, cols, 32);
  Tensor q = Tensor::empty({rows, cols / 2}, DType::U8), s = Tensor::empty({rows, cols / 32}, DType::E8M0);
  test::poison(q);
  test::poison(s);
  quantize(x, q, s);
  Tensor out = Tensor::empty({rows, cols}, DType::F32), out16 = Tensor::empty({rows, cols}, DType::BF16);
  test::poison(out);
  test::poison(out16);
  dequantize(q, s, out);
  dequantize(q, s, out16);
  int64_t bad = 0;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t b = 0; b < cols / 32; ++b) {
      float amax = 0.f;
      for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(bf16_bits_to_f32(x.data<uint16_t>()[r * cols + b * 32 + i])));
      // scale = ceil_pow2(amax / 6), at least 2^-126.
      const double want_scale = std::max(std::exp2(std::ceil(std::log2(double(amax / 6.f)))), std::exp2(-126.0));
      const float scale = ue8m0_to_f32(s.data<uint8_t>()[r * (cols / 32) + b]);
      ASSERT_EQ(double(scale), want_scale) << "row " << r << " block " << b;
      for (int i = 0; i < 32; ++i) {
        const int64_t k = r * cols + b * 32 + i;
        const float xv = bf16_bits_to_f32(x.data<uint16_t>()[k]), got = out.data<float>()[k];
        ASSERT_FALSE(std::isnan(got));
        // e2m1 rounding error: <= 0.25 * scale below 2, <= |x| / 4 above (steps 0.5, 1, 2).
        bad += std::fabs(got - xv) > std::max(0.25f * scale, 0.25f * std::fabs(xv)) * 1.0001f;
        bad += out16.data<uint16_t>()[k] != f32_to_bf16_bits(got);  // exact in bf16
      }
    }
  EXPECT_EQ(bad, 0);
}

TEST(Mxfp4, ZeroBlockGetsFiniteScale) {
  Tensor x = Tensor::zeros({2, 32}, DType::BF16);
  Tensor q = Tensor::empty({2, 16}, DType::I8), s = Tensor::empty({2, 1}, DType::E8M0);
  test::poison(q);
  test::poison(s);
  quantize(x, q, s);
  for (int i = 0; i < 2; ++i) EXPECT_EQ(s.data<uint8_t>()[i], 1);  // 2^-126
  for (int i = 0; i < 32; ++i) EXPECT_EQ(q.data<uint8_t>()[i], 0);
}

TEST(Mxfp4, InvalidInputsRejected) {
  Tensor q = Tensor::zeros({4, 24}, DType::I8), s = Tensor::zeros({4, 1}, DType::E8M0);
  Tensor out = Tensor::empty({4, 48}, DType::F32);
  std::string m = test::error_of([&] { dequantize(q, s, out); });
  EXPECT_NE(m.find("multiple of 32, got 48"), std::string::npos) << m;
  Tensor q2 = Tensor::zeros({4, 32}, DType::I8), s2 = Tensor::zeros({4, 3}, DType::E8M0);
  Tensor out2 = Tensor::empty({4, 64}, DType::F32);
  m = test::error_of([&] { dequantize(q2, s2, out2); });
  EXPECT_NE(m.find("scale must be [4, 2]"), std::string::npos) << m;
  Tensor q3 = Tensor::zeros({4, 31}, DType::I8), s3 = Tensor::zeros({4, 2}, DType::E8M0);
  m = test::error_of([&] { dequantize(q3, s3, out2); });
  EXPECT_NE(m.find("packed must be [4, 32]"), std::string::npos) << m;
  Tensor s4 = Tensor::zeros({4, 2}, DType::F32);
  m = test::error_of([&] { dequantize(q2, s4, out2); });
  EXPECT_NE(m.find("scale must be ue8m0"), std::string::npos) << m;
  Tensor out3 = Tensor::empty({4, 64}, DType::I32);
  m = test::error_of([&] { dequantize(q2, s3, out3); });
  EXPECT_NE(m.find("out must be bf16 or f32, got i32"), std::string::npos) << m;
}

TEST(Mxfp4Cuda, DequantMatchesCpuBitExact) {
  DSA_REQUIRE_CUDA();
  Rng rng;
  for (auto [rows, cols] : {std::pair<int64_t, int64_t>{300, 2048}, {7, 32}, {4096, 96}}) {
    SCOPED_TRACE(std::to_string(rows) + "x" + std::to_string(cols));
    Tensor q = test::random_bytes({rows, cols / 2}, DType::I8, rng);
    Tensor s = Tensor::empty({rows, cols / 32}, DType::E8M0);
    for (int64_t i = 0; i < s.numel(); ++i) s.data<uint8_t>()[i] = static_cast<uint8_t>(rng.randint(1, 254));
    for (DType odt : {DType::F32, DType::BF16}) {
      Tensor out_cpu = Tensor::empty({rows, cols}, odt), out_gpu = Tensor::empty({rows, cols}, odt, Device::cuda());
      test::poison(out_cpu);
      test::poison(out_gpu);
      dequantize(q, s, out_cpu);
      dequantize(q.to(Device::cuda()), s.to(Device::cuda()), out_gpu);
      EXPECT_EQ(test::host_bytes(out_cpu), test::host_bytes(out_gpu)) << dtype_name(odt);
    }
  }
}
