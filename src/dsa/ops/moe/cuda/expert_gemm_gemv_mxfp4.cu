// MXFP4 instantiations of the register-streaming ("GEMV") expert GEMM kernel
// (expert_gemm_gemv_kernel.cuh): tactics 9 and 10.
#include "dsa/ops/moe/cuda/expert_gemm_gemv_kernel.cuh"

namespace dsa::ops::cuda::egemm {

// Both: 64 weight rows per CTA (two warps side by side along N, MW = 2 groups of 16 rows each),
// 8 layout rows, the 128-k chunks split over WK warps.
// 9: WK = 2 (128 threads, 128 registers: 4 CTAs per SM, so the 384 CTAs of a V4-Flash GEMM at
// T = 1 run in one wave); 10: WK = 4 (256 threads: twice the warps and loads in flight per CTA,
// but 2 CTAs per SM: one wave only up to 264 CTAs; for the tuner at larger T / other shapes).
bool launch_gemv_mxfp4(const Args& a, int tactic) {
  if (tactic == 10) return launch_gemv<kMxfp4, 2, 2, 4>(a);
  return launch_gemv<kMxfp4, 2, 2, 2>(a);
}

}  // namespace dsa::ops::cuda::egemm
