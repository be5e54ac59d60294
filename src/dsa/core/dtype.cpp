#include "dsa/core/dtype.h"

#include "dsa/core/error.h"

namespace dsa {

size_t dtype_size(DType t) {
  switch (t) {
    case DType::F64: case DType::I64: return 8;
    case DType::F32: case DType::I32: return 4;
    case DType::BF16: case DType::F16: case DType::I16: return 2;
    case DType::E4M3: case DType::E8M0: case DType::FP4X2: case DType::I8: case DType::U8: return 1;
  }
  fail("dtype_size: unknown dtype code {}", static_cast<int>(t));
}

std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::F32: return "f32";
    case DType::F64: return "f64";
    case DType::BF16: return "bf16";
    case DType::F16: return "f16";
    case DType::E4M3: return "e4m3";
    case DType::E8M0: return "ue8m0";
    case DType::FP4X2: return "fp4x2";
    case DType::I8: return "i8";
    case DType::U8: return "u8";
    case DType::I16: return "i16";
    case DType::I32: return "i32";
    case DType::I64: return "i64";
  }
  return "?";
}

DType parse_dtype(std::string_view n) {
  struct Name { std::string_view name; DType t; };
  static constexpr Name names[] = {
      {"f32", DType::F32},   {"F32", DType::F32},       {"float32", DType::F32},
      {"f64", DType::F64},   {"F64", DType::F64},       {"bf16", DType::BF16},
      {"BF16", DType::BF16}, {"bfloat16", DType::BF16}, {"f16", DType::F16},
      {"F16", DType::F16},   {"e4m3", DType::E4M3},     {"F8_E4M3", DType::E4M3},
      {"fp8_e4m3", DType::E4M3}, {"ue8m0", DType::E8M0}, {"F8_E8M0", DType::E8M0},
      {"fp4x2", DType::FP4X2}, {"i8", DType::I8},       {"I8", DType::I8},
      {"u8", DType::U8},     {"U8", DType::U8},         {"i16", DType::I16},
      {"I16", DType::I16},   {"i32", DType::I32},       {"I32", DType::I32},
      {"i64", DType::I64},   {"I64", DType::I64},
  };
  for (const auto& e : names)
    if (e.name == n) return e.t;
  fail("unknown dtype '{}'", n);
}

}  // namespace dsa
