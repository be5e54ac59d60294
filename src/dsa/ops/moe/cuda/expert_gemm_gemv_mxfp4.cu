// MXFP4 instantiations of the register-streaming ("GEMV") expert GEMM kernel
// (expert_gemm_gemv_kernel.cuh): tactics 9 and 10.
#include "dsa/ops/moe/cuda/expert_gemm_gemv_kernel.cuh"

namespace dsa::ops::cuda::egemm {

// Both: 64 weight rows per CTA (two warps side by side along N, MW = 2 groups of 16 rows each),
// 8 layout rows, the 128-k chunks split over WK warps.
// 9: WK = 2 (128 threads); 10: WK = 4 (256 threads: twice the warps and loads in flight per CTA,
// for T = 1 where a call has only ~2.9 CTAs per SM).
bool launch_gemv_mxfp4(const Args& a, int tactic) {
  if (tactic == 10) return launch_gemv<kMxfp4, 2, 2, 4>(a);
  return launch_gemv<kMxfp4, 2, 2, 2>(a);
}

}  // namespace dsa::ops::cuda::egemm
