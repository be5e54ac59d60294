// FP8 weights with 128x128 block scales (fp8_block.h): quantize/dequantize round trip with
// partial blocks (GLM's 576-row kv_a_proj_with_mqa), scale values, invalid inputs, CUDA vs CPU.
#include <cmath>

#include "dsa/core/dtype_conv.h"
#include "dsa/formats/fp8_block.h"
#include "util.h"

using namespace dsa;
using namespace dsa::formats;
using dsa::test::Rng;

namespace {

void quantize(const Tensor& in, Tensor& w, Tensor& s, ScaleRounding r = ScaleRounding::Pow2Ceil) {
  Fp8BlockQuantParams p;
  p.in = in;
  p.weight = w;
  p.scale = s;
  p.rounding = r;
  fp8_block_quantize(p);
}

void dequantize(const Tensor& w, const Tensor& s, Tensor& out) {
  Fp8BlockDequantParams p;
  p.weight = w;
  p.scale = s;
  p.out = out;
  fp8_block_dequantize(p);
}

float block_amax(const Tensor& x, int64_t br, int64_t bc) {
  const int64_t rows = x.size(0), cols = x.size(1);
  float amax = 0.f;
  for (int64_t r = br * 128; r < std::min(rows, br * 128 + 128); ++r)
    for (int64_t c = bc * 128; c < std::min(cols, bc * 128 + 128); ++c)
      amax = std::max(amax, std::fabs(bf16_bits_to_f32(x.data<uint16_t>()[r * cols + c])));
  return amax;
}

// Quantize + dequantize; every element within the e4m3 bound of its block's scale, and every scale
// equal to the rule (computed here with log2/ceil in double).
void round_trip(int64_t rows, int64_t cols, DType scale_dtype, ScaleRounding rounding) {
  SCOPED_TRACE(std::to_string(rows) + "x" + std::to_string(cols) + " scale " + std::string(dtype_name(scale_dtype)));
  Rng rng;
  Tensor x = test::random_grouped_bf16(rng, rows, cols, 64);
  const Shape ss = {(rows + 127) / 128, (cols + 127) / 128};
  EXPECT_EQ(fp8_block_scale_shape(rows, cols), ss);
  Tensor w = Tensor::empty({rows, cols}, DType::E4M3), s = Tensor::empty(ss, scale_dtype);
  test::poison(w);
  test::poison(s);
  quantize(x, w, s, rounding);
  auto scale_of = [&](int64_t br, int64_t bc) {
    const int64_t i = br * ss[1] + bc;
    return scale_dtype == DType::F32 ? s.data<float>()[i] : ue8m0_to_f32(s.data<uint8_t>()[i]);
  };
  for (int64_t br = 0; br < ss[0]; ++br)
    for (int64_t bc = 0; bc < ss[1]; ++bc) {
      const float q = std::max(block_amax(x, br, bc), 1e-4f) / 448.f;
      const bool pow2 = scale_dtype != DType::F32 || rounding == ScaleRounding::Pow2Ceil;
      const float want = pow2 ? static_cast<float>(std::exp2(std::ceil(std::log2(double(q))))) : q;
      ASSERT_EQ(scale_of(br, bc), want) << "block " << br << "," << bc;
    }
  for (DType odt : {DType::F32, DType::BF16}) {
    Tensor out = Tensor::empty({rows, cols}, odt);
    test::poison(out);
    dequantize(w, s, out);
    int64_t bad = 0;
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c) {
        const int64_t i = r * cols + c;
        const float want = bf16_bits_to_f32(x.data<uint16_t>()[i]);
        const float scale = scale_of(r / 128, c / 128);
        const float exact = e4m3_to_f32(w.data<uint8_t>()[i]) * scale;
        const float got = odt == DType::F32 ? out.data<float>()[i] : bf16_bits_to_f32(out.data<uint16_t>()[i]);
        ASSERT_FALSE(std::isnan(got)) << r << "," << c;
        if (odt == DType::BF16) {
          bad += got != round_to_bf16(exact);
        } else {
          bad += got != exact;
          bad += !test::within_e4m3(got, want, scale);
        }
      }
    EXPECT_EQ(bad, 0) << dtype_name(odt);
  }
}

}  // namespace

TEST(Fp8Block, RoundTripPartialBlocksUe8m0) {
  round_trip(576, 200, DType::E8M0, ScaleRounding::Pow2Ceil);  // 5 x 2 blocks, both partial
  round_trip(130, 128, DType::E8M0, ScaleRounding::Pow2Ceil);
  round_trip(1, 1, DType::E8M0, ScaleRounding::Pow2Ceil);
}

TEST(Fp8Block, RoundTripFp32Scales) {
  round_trip(576, 300, DType::F32, ScaleRounding::Exact);
  round_trip(256, 129, DType::F32, ScaleRounding::Pow2Ceil);
}

TEST(Fp8Block, DequantArbitraryFp32Scale) {
  // One 128x128 block, scale 0.01 (not a power of two): out = e4m3 value * 0.01f exactly.
  Rng rng;
  Tensor w = test::random_bytes({100, 70}, DType::E4M3, rng);
  for (int64_t i = 0; i < w.numel(); ++i)
    if ((w.data<uint8_t>()[i] & 0x7F) == 0x7F) w.data<uint8_t>()[i] = 0x33;
  Tensor s = Tensor::empty({1, 1}, DType::F32);
  s.data<float>()[0] = 0.01f;
  Tensor out = Tensor::empty({100, 70}, DType::F32);
  test::poison(out);
  dequantize(w, s, out);
  for (int64_t i = 0; i < w.numel(); ++i)
    ASSERT_EQ(out.data<float>()[i], e4m3_to_f32(w.data<uint8_t>()[i]) * 0.01f);
}

TEST(Fp8Block, InvalidInputsRejected) {
  Tensor w = Tensor::zeros({576, 200}, DType::E4M3);
  Tensor s = Tensor::zeros({4, 2}, DType::E8M0);
  Tensor out = Tensor::empty({576, 200}, DType::BF16);
  std::string m = test::error_of([&] { dequantize(w, s, out); });
  EXPECT_NE(m.find("must be [5, 2], got [4, 2]"), std::string::npos) << m;
  Tensor s2 = Tensor::zeros({5, 2}, DType::BF16);
  m = test::error_of([&] { dequantize(w, s2, out); });
  EXPECT_NE(m.find("scale must be ue8m0 (or raw u8) or f32, got bf16"), std::string::npos) << m;
  Tensor s3 = Tensor::zeros({5, 2}, DType::E8M0), out2 = Tensor::empty({576, 201}, DType::F32);
  m = test::error_of([&] { dequantize(w, s3, out2); });
  EXPECT_NE(m.find("out must have the weight's shape [576, 200]"), std::string::npos) << m;
  Tensor wb = Tensor::zeros({576, 200}, DType::BF16);
  m = test::error_of([&] { dequantize(wb, s3, out); });
  EXPECT_NE(m.find("weight must be e4m3"), std::string::npos) << m;
  Fp8BlockDequantParams p;
  p.weight = w;
  p.scale = s3;
  p.out = out;
  p.block_in = 0;
  m = test::error_of([&] { fp8_block_dequantize(p); });
  EXPECT_NE(m.find("block_in must be positive, got 0"), std::string::npos) << m;
  Tensor xin = Tensor::zeros({576, 200}, DType::F32);
  m = test::error_of([&] { quantize(xin, w, s3, ScaleRounding::Exact); });
  EXPECT_NE(m.find("ue8m0 scales need rounding Pow2Ceil"), std::string::npos) << m;
}

TEST(Fp8BlockCuda, DequantMatchesCpuBitExact) {
  DSA_REQUIRE_CUDA();
  Rng rng;
  struct Case {
    int64_t rows, cols;
    DType sdt;
  };
  for (Case c : {Case{576, 7168, DType::E8M0}, Case{576, 1000, DType::F32}, Case{130, 3, DType::E8M0},
                 Case{1, 129, DType::F32}, Case{2048, 512, DType::U8}}) {
    SCOPED_TRACE(std::to_string(c.rows) + "x" + std::to_string(c.cols));
    Tensor w = test::random_bytes({c.rows, c.cols}, DType::E4M3, rng);
    for (int64_t i = 0; i < w.numel(); ++i)
      if ((w.data<uint8_t>()[i] & 0x7F) == 0x7F) w.data<uint8_t>()[i] = 0x5A;  // NaN payloads differ by device
    const Shape ss = fp8_block_scale_shape(c.rows, c.cols);
    Tensor s = Tensor::empty(ss, c.sdt);
    for (int64_t i = 0; i < s.numel(); ++i) {
      if (c.sdt == DType::F32)
        s.data<float>()[i] = rng.uniform(1e-5f, 1e-1f);
      else
        s.data<uint8_t>()[i] = static_cast<uint8_t>(rng.randint(100, 135));
    }
    for (DType odt : {DType::F32, DType::BF16}) {
      Tensor out_cpu = Tensor::empty({c.rows, c.cols}, odt);
      Tensor out_gpu = Tensor::empty({c.rows, c.cols}, odt, Device::cuda());
      test::poison(out_cpu);
      test::poison(out_gpu);
      dequantize(w, s, out_cpu);
      dequantize(w.to(Device::cuda()), s.to(Device::cuda()), out_gpu);
      EXPECT_EQ(test::host_bytes(out_cpu), test::host_bytes(out_gpu)) << dtype_name(odt);
    }
  }
}

TEST(Fp8BlockCuda, QuantizeRejectsCudaTensors) {
  DSA_REQUIRE_CUDA();
  Tensor x = Tensor::zeros({128, 128}, DType::BF16, Device::cuda());
  Tensor w = Tensor::empty({128, 128}, DType::E4M3), s = Tensor::empty({1, 1}, DType::E8M0);
  std::string m = test::error_of([&] { quantize(x, w, s); });
  EXPECT_NE(m.find("CPU only"), std::string::npos) << m;
}
