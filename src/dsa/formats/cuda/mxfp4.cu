// Dequantization of MXFP4 weights (mxfp4.h) to f32 or bf16.
#include "dsa/core/pdl.cuh"
#include "dsa/formats/cuda/common.cuh"
#include "dsa/core/cuda_launch.h"
#include "dsa/formats/cuda/launchers.h"

namespace dsa::formats::cuda {
namespace {

constexpr int kThreads = 256;

// e2m1 code (S.EE.M) -> float without a lookup table (a table in a __device__ function lands in
// local memory): exponent 0 is subnormal (0 or 0.5), else (1 + m/2) * 2^(e-1). Equals
// dsa::e2m1_to_f32 for all 16 codes (checked by the Cuda-vs-CPU test over random bytes).
__device__ __forceinline__ float e2m1_value(uint32_t c) {
  const uint32_t e = (c >> 1) & 3u, m = c & 1u;
  const float mag = e == 0 ? 0.5f * static_cast<float>(m) : (1.0f + 0.5f * static_cast<float>(m)) * static_cast<float>(1u << (e - 1));
  return (c & 8u) ? -mag : mag;
}

// One thread per packed byte (two output values: low nibble -> even column, high nibble -> odd
// column), grid-stride over rows * cols/2 bytes; the UE8M0 scale of the byte's 32-value block is
// byte index / 16 within the row. cols is a multiple of 32 (validated), so a byte never straddles
// rows or blocks. Memory-bound; used at load time and by reference paths.
__global__ void __launch_bounds__(kThreads) mxfp4_dequant_kernel(Mxfp4DequantArgs a) {
  pdl::entry();
  const int64_t half = a.cols / 2;
  const int64_t n = a.rows * half;
  for (int64_t i = int64_t(blockIdx.x) * kThreads + threadIdx.x; i < n; i += int64_t(gridDim.x) * kThreads) {
    const int64_t r = i / half, b = i % half;
    const uint8_t byte = a.packed[i];
    const float scale = ue8m0_to_f32(a.scale[r * (a.cols / 32) + b / 16]);
    store_value(a.out, r * a.cols + 2 * b, e2m1_value(byte & 0xFu) * scale, a.out_bf16);
    store_value(a.out, r * a.cols + 2 * b + 1, e2m1_value(byte >> 4) * scale, a.out_bf16);
  }
}

}  // namespace

void mxfp4_dequantize(const Mxfp4DequantArgs& a) {
  cuda_launch::set_device(a.device);
  pdl::launch(mxfp4_dequant_kernel, grid_for(a.rows * (a.cols / 2), kThreads), kThreads, 0, as_stream(a.stream), a);
  cuda_launch::check_launch("mxfp4_dequant_kernel");
}

}  // namespace dsa::formats::cuda
