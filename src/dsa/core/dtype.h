// Element types the engine stores. Conversions live in dtype_conv.h.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace dsa {

enum class DType : uint8_t {
  F32,
  F64,
  BF16,
  F16,
  E4M3,   // fp8 e4m3fn
  E8M0,   // UE8M0 exponent byte
  FP4X2,  // two e2m1 values per byte, low nibble first (stored as I8 in checkpoints)
  I8,
  U8,
  I16,
  I32,
  I64,
};

// Bytes of one stored element (FP4X2: one byte holding two values).
size_t dtype_size(DType t);
std::string_view dtype_name(DType t);
// Accepts our names and safetensors names (F32, BF16, F8_E4M3, F8_E8M0, I8, ...). Throws dsa::Error.
DType parse_dtype(std::string_view name);

// bf16 storage type: 16 raw bits. Arithmetic happens in float.
struct bf16 {
  uint16_t bits;
};

}  // namespace dsa
