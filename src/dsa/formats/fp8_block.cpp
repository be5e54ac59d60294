// Validation, CPU reference and CUDA dispatch of FP8 block-scaled weights (fp8_block.h).
#include "dsa/formats/fp8_block.h"

#include <algorithm>
#include <cstring>

#include "dsa/formats/quant_math.h"
#ifdef DSA_WITH_CUDA
#include "dsa/formats/cuda/launchers.h"
#endif

namespace dsa::formats {

namespace {
int64_t cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

bool is_byte_e4m3(DType t) { return t == DType::E4M3 || t == DType::U8 || t == DType::I8; }
bool is_ue8m0(DType t) { return t == DType::E8M0 || t == DType::U8; }

void check_blocks(std::string_view op, int block_out, int block_in) {
  DSA_CHECK(block_out > 0, "{}: block_out must be positive, got {}", op, block_out);
  DSA_CHECK(block_in > 0, "{}: block_in must be positive, got {}", op, block_in);
}

void check_2d(std::string_view op, std::string_view field, const Tensor& t) {
  DSA_CHECK(t.defined(), "{}: {} tensor is missing", op, field);
  DSA_CHECK(t.dim() == 2, "{}: {} must be 2-D, got {}", op, field, t.str());
  DSA_CHECK(t.is_contiguous(), "{}: {} must be contiguous, got {}", op, field, t.str());
}

float scale_at(const Tensor& scale, int64_t i) {
  if (scale.dtype() == DType::F32) return scale.data<float>()[i];
  return ue8m0_to_f32(scale.data<uint8_t>()[i]);
}
}  // namespace

Shape fp8_block_scale_shape(int64_t rows, int64_t cols, int block_out, int block_in) {
  check_blocks("fp8_block_scale_shape", block_out, block_in);
  return {cdiv(rows, block_out), cdiv(cols, block_in)};
}

void Fp8BlockDequantParams::validate() const {
  constexpr std::string_view op = "fp8_block_dequantize";
  check_blocks(op, block_out, block_in);
  check_2d(op, "weight", weight);
  check_2d(op, "scale", scale);
  check_2d(op, "out", out);
  DSA_CHECK(is_byte_e4m3(weight.dtype()), "{}: weight must be e4m3 (or raw u8/i8), got {}", op,
            dtype_name(weight.dtype()));
  DSA_CHECK(is_ue8m0(scale.dtype()) || scale.dtype() == DType::F32, "{}: scale must be ue8m0 (or raw u8) or f32, got {}",
            op, dtype_name(scale.dtype()));
  DSA_CHECK(out.dtype() == DType::BF16 || out.dtype() == DType::F32, "{}: out must be bf16 or f32, got {}", op,
            dtype_name(out.dtype()));
  const Shape want = fp8_block_scale_shape(weight.size(0), weight.size(1), block_out, block_in);
  DSA_CHECK(scale.shape() == want, "{}: scale for weight {} with {}x{} blocks must be {}, got {}", op,
            shape_str(weight.shape()), block_out, block_in, shape_str(want), shape_str(scale.shape()));
  DSA_CHECK(out.shape() == weight.shape(), "{}: out must have the weight's shape {}, got {}", op,
            shape_str(weight.shape()), shape_str(out.shape()));
  DSA_CHECK(scale.device() == weight.device() && out.device() == weight.device(),
            "{}: weight on {}, scale on {}, out on {}: all must be on one device", op, weight.device().str(),
            scale.device().str(), out.device().str());
}

void fp8_block_dequantize_cpu(const Fp8BlockDequantParams& p) {
  p.validate();
  DSA_CHECK(!p.weight.device().is_cuda(), "fp8_block_dequantize_cpu: tensors must be on the CPU, got {}",
            p.weight.device().str());
  const int64_t rows = p.weight.size(0), cols = p.weight.size(1), scols = p.scale.size(1);
  const auto* w = p.weight.data<uint8_t>();
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) {
      const float v = dequantize_e4m3(w[r * cols + c], scale_at(p.scale, (r / p.block_out) * scols + c / p.block_in));
      if (p.out.dtype() == DType::F32)
        p.out.data<float>()[r * cols + c] = v;
      else
        p.out.data<uint16_t>()[r * cols + c] = f32_to_bf16_bits(v);
    }
  }
}

void fp8_block_dequantize(const Fp8BlockDequantParams& p) {
  if (!p.weight.device().is_cuda()) return fp8_block_dequantize_cpu(p);
  p.validate();
#ifdef DSA_WITH_CUDA
  if (p.weight.numel() == 0) return;
  cuda::Fp8BlockDequantArgs a;
  a.weight = p.weight.data<uint8_t>();
  a.scale = p.scale.raw();
  a.scale_ue8m0 = p.scale.dtype() != DType::F32;
  a.rows = p.weight.size(0);
  a.cols = p.weight.size(1);
  a.block_rows = p.block_out;
  a.block_cols = p.block_in;
  a.out = p.out.raw();
  a.out_bf16 = p.out.dtype() == DType::BF16;
  a.stream = p.stream;
  a.device = p.weight.device().index;
  cuda::fp8_block_dequantize(a);
#else
  fail("fp8_block_dequantize: tensors are on {} but this dsa build has no CUDA", p.weight.device().str());
#endif
}

void Fp8BlockQuantParams::validate() const {
  constexpr std::string_view op = "fp8_block_quantize";
  check_blocks(op, block_out, block_in);
  check_2d(op, "in", in);
  check_2d(op, "weight", weight);
  check_2d(op, "scale", scale);
  DSA_CHECK(in.dtype() == DType::BF16 || in.dtype() == DType::F32, "{}: in must be bf16 or f32, got {}", op,
            dtype_name(in.dtype()));
  DSA_CHECK(is_byte_e4m3(weight.dtype()), "{}: weight must be e4m3 (or raw u8/i8), got {}", op,
            dtype_name(weight.dtype()));
  DSA_CHECK(is_ue8m0(scale.dtype()) || scale.dtype() == DType::F32, "{}: scale must be ue8m0 (or raw u8) or f32, got {}",
            op, dtype_name(scale.dtype()));
  DSA_CHECK(weight.shape() == in.shape(), "{}: weight must have the input's shape {}, got {}", op,
            shape_str(in.shape()), shape_str(weight.shape()));
  const Shape want = fp8_block_scale_shape(in.size(0), in.size(1), block_out, block_in);
  DSA_CHECK(scale.shape() == want, "{}: scale must be {}, got {}", op, shape_str(want), shape_str(scale.shape()));
  DSA_CHECK(!in.device().is_cuda() && !weight.device().is_cuda() && !scale.device().is_cuda(),
            "{}: quantization runs on the CPU only; got in on {}, weight on {}, scale on {}", op, in.device().str(),
            weight.device().str(), scale.device().str());
  DSA_CHECK(is_ue8m0(scale.dtype()) ? rounding == ScaleRounding::Pow2Ceil : true,
            "{}: ue8m0 scales need rounding Pow2Ceil", op);
}

void fp8_block_quantize(const Fp8BlockQuantParams& p) {
  p.validate();
  const int64_t rows = p.in.size(0), cols = p.in.size(1);
  const Shape sshape = fp8_block_scale_shape(rows, cols, p.block_out, p.block_in);
  auto value = [&](int64_t r, int64_t c) {
    const int64_t i = r * cols + c;
    return p.in.dtype() == DType::F32 ? p.in.data<float>()[i] : bf16_bits_to_f32(p.in.data<uint16_t>()[i]);
  };
  for (int64_t br = 0; br < sshape[0]; ++br) {
    for (int64_t bc = 0; bc < sshape[1]; ++bc) {
      const int64_t r0 = br * p.block_out, r1 = std::min(rows, r0 + p.block_out);
      const int64_t c0 = bc * p.block_in, c1 = std::min(cols, c0 + p.block_in);
      float amax = 0.f;
      for (int64_t r = r0; r < r1; ++r)
        for (int64_t c = c0; c < c1; ++c) amax = amax_update(amax, value(r, c));
      float scale;
      if (is_ue8m0(p.scale.dtype())) {
        const uint8_t e = e4m3_scale_ue8m0(amax);
        p.scale.data<uint8_t>()[br * sshape[1] + bc] = e;
        scale = ue8m0_to_f32(e);
      } else {
        scale = e4m3_scale(amax, p.rounding == ScaleRounding::Pow2Ceil);
        p.scale.data<float>()[br * sshape[1] + bc] = scale;
      }
      for (int64_t r = r0; r < r1; ++r)
        for (int64_t c = c0; c < c1; ++c) p.weight.data<uint8_t>()[r * cols + c] = quantize_e4m3(value(r, c), scale);
    }
  }
}

}  // namespace dsa::formats
