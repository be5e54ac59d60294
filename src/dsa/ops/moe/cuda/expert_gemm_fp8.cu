// FP8 (e4m3, 128x128 fp32 block scales) instantiations of the grouped expert GEMM.
#include "dsa/ops/moe/cuda/expert_gemm_kernel.cuh"
#include "dsa/core/cuda_stream.h"

namespace dsa::ops::cuda::egemm {

// tile 0: 16 x 64, 4 stages (~49 KB); tile 1: 64 x 64, 3 stages (~74 KB). (64 x 128 needs 255
// registers with the per-chunk fp32 partial sums and spills on sm_90a, so the FP8 prefill tile is
// narrower than the MXFP4 one.)
// tile 2: tile 0 with 8 warps splitting every chunk's k in two.
void launch_fp8(const Args& a, int tile) {
  if (tile == 0)
    launch<kFp8, 16, 2, 4>(a);
  else if (tile == 1)
    launch<kFp8, 64, 2, 3>(a);
  else
    launch<kFp8, 16, 2, 4, 2>(a);
}

// UE8M0 block scales -> fp32 (the kernel reads fp32 scales). One thread per scale.
__global__ void ue8m0_to_f32_kernel(const uint8_t* in, float* out, int64_t n) {
  int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) out[i] = in[i] == 0xFF ? __int_as_float(0x7FC00000) : (in[i] == 0 ? __int_as_float(0x00400000) : __int_as_float(static_cast<int>(in[i]) << 23));
}
void launch_ue8m0_to_f32(const uint8_t* in, float* out, int64_t n) {
  if (n > 0) ue8m0_to_f32_kernel<<<static_cast<unsigned>((n + 255) / 256), 256, 0, DSA_CURRENT_STREAM>>>(in, out, n);
}

}  // namespace dsa::ops::cuda::egemm
