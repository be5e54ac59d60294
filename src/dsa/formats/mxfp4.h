// MXFP4 weights (docs/model-reference.md §1 and §6; DeepSeek-V4 routed experts): e2m1 values
// {0, 0.5, 1, 1.5, 2, 3, 4, 6} with sign, two per byte (low nibble = even element), stored as
// I8/U8 [out][in/2]; one UE8M0 scale per 32 consecutive values along `in`: scale [out][in/32].
// value = e2m1 * 2^(scale - 127). `in` must be a multiple of 32.
//
// Quantize (CPU only; tests and tiny models): per block of 32, scale = ceil_pow2(amax / 6) (at
// least 2^-126, so a zero block has a finite scale), e2m1 = RNE(x / scale), saturating at +-6.
// Dequantize on CPU and CUDA (dispatch by device) to f32 or bf16; both are exact (an e2m1 value
// has at most 2 significant bits). Scale byte 0xFF is UE8M0's NaN and gives NaN.
#pragma once
#include "dsa/core/tensor.h"

namespace dsa::formats {

struct Mxfp4DequantParams {
  Tensor packed;  // FP4X2, I8 or U8 [out][in/2], contiguous
  Tensor scale;   // E8M0 or U8 [out][in/32], contiguous
  Tensor out;     // BF16 or F32 [out][in], contiguous
  void* stream = nullptr;  // cudaStream_t for the CUDA path (null = default stream)
  void validate() const;   // throws dsa::Error naming the field and value
};
void mxfp4_dequantize(const Mxfp4DequantParams& p);
void mxfp4_dequantize_cpu(const Mxfp4DequantParams& p);

struct Mxfp4QuantParams {
  Tensor in;      // BF16 or F32 [out][in], contiguous, CPU
  Tensor packed;  // output: FP4X2, I8 or U8 [out][in/2], contiguous, CPU
  Tensor scale;   // output: E8M0 or U8 [out][in/32], contiguous, CPU
  void validate() const;
};
void mxfp4_quantize(const Mxfp4QuantParams& p);

constexpr int kMxfp4Block = 32;

}  // namespace dsa::formats
