// FP8 weights with block scales (docs/model-reference.md §1 and §6): an e4m3 matrix [out][in] and a
// scale grid [ceil(out/128)][ceil(in/128)] (UE8M0 bytes, safetensors F8_E8M0, or fp32 as in GLM's
// `weight_scale_inv`); value = e4m3 * scale of its 128x128 block. out and in need not be multiples
// of 128 (GLM's kv_a_proj_with_mqa has 576 rows: 5 row blocks, the last one half full).
//
// Quantize (CPU only; for tests and tiny-model generation): per block, scale = max(amax, 1e-4) / 448,
// rounded up to a power of two for UE8M0 scales (and for fp32 with ScaleRounding::Pow2Ceil);
// e4m3 = x / scale, saturating. Dequantize on CPU and CUDA (dispatch by the tensors' device):
// out = e4m3 * scale in fp32, stored as f32 or bf16 (round to nearest even).
#pragma once
#include "dsa/core/tensor.h"
#include "dsa/formats/quant_math.h"

namespace dsa::formats {

struct Fp8BlockDequantParams {
  Tensor weight;  // E4M3 (or raw U8/I8) [out][in], contiguous
  Tensor scale;   // E8M0 (or raw U8) or F32 [ceil(out/block_out)][ceil(in/block_in)], contiguous
  Tensor out;     // BF16 or F32 [out][in], contiguous
  int block_out = 128, block_in = 128;
  void* stream = nullptr;  // cudaStream_t for the CUDA path (null = default stream)
  void validate() const;   // throws dsa::Error naming the field and value
};
void fp8_block_dequantize(const Fp8BlockDequantParams& p);
void fp8_block_dequantize_cpu(const Fp8BlockDequantParams& p);

struct Fp8BlockQuantParams {
  Tensor in;      // BF16 or F32 [out][in], contiguous, CPU
  Tensor weight;  // output: E4M3 [out][in], contiguous, CPU
  Tensor scale;   // output: E8M0 or F32 [ceil(out/block_out)][ceil(in/block_in)], contiguous, CPU
  int block_out = 128, block_in = 128;
  ScaleRounding rounding = ScaleRounding::Pow2Ceil;  // fp32 scales only; E8M0 is always Pow2Ceil
  void validate() const;
};
void fp8_block_quantize(const Fp8BlockQuantParams& p);

// [ceil(rows/block_out)][ceil(cols/block_in)]
Shape fp8_block_scale_shape(int64_t rows, int64_t cols, int block_out = 128, int block_in = 128);

}  // namespace dsa::formats
