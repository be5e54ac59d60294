// Validation, CPU reference and CUDA dispatch of MXFP4 weights (mxfp4.h).
#include "dsa/formats/mxfp4.h"

#include "dsa/core/dtype_conv.h"
#include "dsa/formats/quant_math.h"
#ifdef DSA_WITH_CUDA
#include "dsa/formats/cuda/launchers.h"
#endif

namespace dsa::formats {

namespace {
bool is_packed_fp4(DType t) { return t == DType::FP4X2 || t == DType::I8 || t == DType::U8; }
bool is_ue8m0(DType t) { return t == DType::E8M0 || t == DType::U8; }

void check_2d(std::string_view op, std::string_view field, const Tensor& t) {
  DSA_CHECK(t.defined(), "{}: {} tensor is missing", op, field);
  DSA_CHECK(t.dim() == 2, "{}: {} must be 2-D, got {}", op, field, t.str());
  DSA_CHECK(t.is_contiguous(), "{}: {} must be contiguous, got {}", op, field, t.str());
}

// Shared checks: `values` is the unpacked [out][in] tensor (out for dequant, in for quant).
void check_shapes(std::string_view op, const Tensor& values, const Tensor& packed, const Tensor& scale) {
  check_2d(op, "packed", packed);
  check_2d(op, "scale", scale);
  DSA_CHECK(is_packed_fp4(packed.dtype()), "{}: packed must be fp4x2, i8 or u8, got {}", op, dtype_name(packed.dtype()));
  DSA_CHECK(is_ue8m0(scale.dtype()), "{}: scale must be ue8m0 (or raw u8), got {}", op, dtype_name(scale.dtype()));
  const int64_t rows = values.size(0), cols = values.size(1);
  DSA_CHECK(cols % kMxfp4Block == 0, "{}: the inner dimension must be a multiple of {}, got {} (tensor {})", op,
            kMxfp4Block, cols, values.str());
  DSA_CHECK(packed.shape() == Shape({rows, cols / 2}), "{}: packed must be {} for values {}, got {}", op,
            shape_str({rows, cols / 2}), shape_str(values.shape()), shape_str(packed.shape()));
  DSA_CHECK(scale.shape() == Shape({rows, cols / kMxfp4Block}), "{}: scale must be {} for values {}, got {}", op,
            shape_str({rows, cols / kMxfp4Block}), shape_str(values.shape()), shape_str(scale.shape()));
}
}  // namespace

void Mxfp4DequantParams::validate() const {
  constexpr std::string_view op = "mxfp4_dequantize";
  check_2d(op, "out", out);
  DSA_CHECK(out.dtype() == DType::BF16 || out.dtype() == DType::F32, "{}: out must be bf16 or f32, got {}", op,
            dtype_name(out.dtype()));
  check_shapes(op, out, packed, scale);
  DSA_CHECK(scale.device() == packed.device() && out.device() == packed.device(),
            "{}: packed on {}, scale on {}, out on {}: all must be on one device", op, packed.device().str(),
            scale.device().str(), out.device().str());
}

void mxfp4_dequantize_cpu(const Mxfp4DequantParams& p) {
  p.validate();
  DSA_CHECK(!p.packed.device().is_cuda(), "mxfp4_dequantize_cpu: tensors must be on the CPU, got {}",
            p.packed.device().str());
  const int64_t rows = p.out.size(0), cols = p.out.size(1);
  const auto* q = p.packed.data<uint8_t>();
  const auto* s = p.scale.data<uint8_t>();
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) {
      const uint8_t byte = q[r * (cols / 2) + c / 2];
      const uint8_t code = (c % 2 == 0) ? (byte & 0xF) : (byte >> 4);
      const float v = e2m1_to_f32(code) * ue8m0_to_f32(s[r * (cols / kMxfp4Block) + c / kMxfp4Block]);
      if (p.out.dtype() == DType::F32)
        p.out.data<float>()[r * cols + c] = v;
      else
        p.out.data<uint16_t>()[r * cols + c] = f32_to_bf16_bits(v);
    }
  }
}

void mxfp4_dequantize(const Mxfp4DequantParams& p) {
  if (!p.packed.device().is_cuda()) return mxfp4_dequantize_cpu(p);
  p.validate();
#ifdef DSA_WITH_CUDA
  if (p.out.numel() == 0) return;
  cuda::Mxfp4DequantArgs a;
  a.packed = p.packed.data<uint8_t>();
  a.scale = p.scale.data<uint8_t>();
  a.rows = p.out.size(0);
  a.cols = p.out.size(1);
  a.out = p.out.raw();
  a.out_bf16 = p.out.dtype() == DType::BF16;
  a.stream = p.stream;
  a.device = p.packed.device().index;
  cuda::mxfp4_dequantize(a);
#else
  fail("mxfp4_dequantize: tensors are on {} but this dsa build has no CUDA", p.packed.device().str());
#endif
}

void Mxfp4QuantParams::validate() const {
  constexpr std::string_view op = "mxfp4_quantize";
  check_2d(op, "in", in);
  DSA_CHECK(in.dtype() == DType::BF16 || in.dtype() == DType::F32, "{}: in must be bf16 or f32, got {}", op,
            dtype_name(in.dtype()));
  check_shapes(op, in, packed, scale);
  DSA_CHECK(!in.device().is_cuda() && !packed.device().is_cuda() && !scale.device().is_cuda(),
            "{}: quantization runs on the CPU only; got in on {}, packed on {}, scale on {}", op, in.device().str(),
            packed.device().str(), scale.device().str());
}

void mxfp4_quantize(const Mxfp4QuantParams& p) {
  p.validate();
  const int64_t rows = p.in.size(0), cols = p.in.size(1);
  auto value = [&](int64_t i) {
    return p.in.dtype() == DType::F32 ? p.in.data<float>()[i] : bf16_bits_to_f32(p.in.data<uint16_t>()[i]);
  };
  auto* q = p.packed.data<uint8_t>();
  auto* s = p.scale.data<uint8_t>();
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t b = 0; b < cols / kMxfp4Block; ++b) {
      const int64_t c0 = r * cols + b * kMxfp4Block;
      float amax = 0.f;
      for (int i = 0; i < kMxfp4Block; ++i) amax = amax_update(amax, value(c0 + i));
      const uint8_t e = e2m1_scale_ue8m0(amax);
      const float scale = ue8m0_to_f32(e);
      s[r * (cols / kMxfp4Block) + b] = e;
      for (int i = 0; i < kMxfp4Block; i += 2) {
        const uint8_t lo = f32_to_e2m1(value(c0 + i) / scale), hi = f32_to_e2m1(value(c0 + i + 1) / scale);
        q[c0 / 2 + i / 2] = static_cast<uint8_t>(lo | (hi << 4));
      }
    }
  }
}

}  // namespace dsa::formats
