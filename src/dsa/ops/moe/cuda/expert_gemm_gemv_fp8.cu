// FP8 (e4m3, 128x128 block scales, fp32 or UE8M0) instantiations of the register-streaming
// ("GEMV") expert GEMM kernel (expert_gemm_gemv_kernel.cuh): tactics 9 and 10.
#include "dsa/ops/moe/cuda/expert_gemm_gemv_kernel.cuh"

namespace dsa::ops::cuda::egemm {

// Both: 64 weight rows per CTA (four warps side by side along N, one group of 16 rows each: an
// FP8 row takes two 16-byte loads per chunk, so one group keeps the register sets of the k walk
// at the MXFP4 forms' size), one layout segment per CTA, every warp walks all of K (128 threads).
// 9: two register sets (128 registers, 4 CTAs per SM); 10: three (two chunks in flight, up to
// 168 registers, 3 CTAs per SM).
bool launch_gemv_fp8(const Args& a, int tactic) {
  if (tactic == 10) return launch_gemv<kFp8, 1, 4, 1, 3>(a);
  return launch_gemv<kFp8, 1, 4, 1, 2>(a);
}

}  // namespace dsa::ops::cuda::egemm
