// Dequantization of FP8 weights with block scales (fp8_block.h) to f32 or bf16.
#include "dsa/core/pdl.cuh"
#include "dsa/formats/cuda/common.cuh"
#include "dsa/core/cuda_launch.h"
#include "dsa/formats/cuda/launchers.h"
#include "dsa/formats/quant_math.h"

namespace dsa::formats::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kPerThread = 4;  // consecutive elements of one row per thread (fewer index divisions)

// out[r][c] = e4m3(weight[r][c]) * scale[r / block_rows][c / block_cols], row-major contiguous.
// Each thread handles kPerThread consecutive columns of one row (the row split into chunks of 4,
// the last chunk possibly short), grid-stride over all chunks; scales are looked up per element
// (a handful of distinct, cached values per warp). Memory-bound; used at weight-load time and by
// reference paths, not in the hot loop of a GEMM.
__global__ void __launch_bounds__(kThreads) fp8_block_dequant_kernel(Fp8BlockDequantArgs a) {
  pdl::entry();
  const int64_t chunks_per_row = (a.cols + kPerThread - 1) / kPerThread;
  const int64_t n = a.rows * chunks_per_row;
  const int64_t scale_cols = (a.cols + a.block_cols - 1) / a.block_cols;
  for (int64_t i = int64_t(blockIdx.x) * kThreads + threadIdx.x; i < n; i += int64_t(gridDim.x) * kThreads) {
    const int64_t r = i / chunks_per_row;
    const int64_t c0 = (i % chunks_per_row) * kPerThread;
    const int64_t srow = (r / a.block_rows) * scale_cols;
#pragma unroll
    for (int j = 0; j < kPerThread; ++j) {
      const int64_t c = c0 + j;
      if (c >= a.cols) break;
      const int64_t s = srow + c / a.block_cols;
      const float scale = a.scale_ue8m0 ? ue8m0_to_f32(static_cast<const uint8_t*>(a.scale)[s])
                                        : static_cast<const float*>(a.scale)[s];
      store_value(a.out, r * a.cols + c, dequantize_e4m3(a.weight[r * a.cols + c], scale), a.out_bf16);
    }
  }
}

}  // namespace

void fp8_block_dequantize(const Fp8BlockDequantArgs& a) {
  cuda_launch::set_device(a.device);
  const int64_t chunks = a.rows * ((a.cols + kPerThread - 1) / kPerThread);
  pdl::launch(fp8_block_dequant_kernel, grid_for(chunks, kThreads), kThreads, 0, as_stream(a.stream), a);
  cuda_launch::check_launch("fp8_block_dequant_kernel");
}

}  // namespace dsa::formats::cuda
