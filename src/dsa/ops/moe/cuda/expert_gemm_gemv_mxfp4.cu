// MXFP4 instantiations of the register-streaming ("GEMV") expert GEMM kernel
// (expert_gemm_gemv_kernel.cuh): tactics 9 and 10.
#include "dsa/ops/moe/cuda/expert_gemm_gemv_kernel.cuh"

namespace dsa::ops::cuda::egemm {

// Both: 64 weight rows per CTA (two warps side by side along N, MW = 2 groups of 16 rows each),
// one layout segment per CTA, the 128-k chunks split over WK = 2 warps (128 threads).
// 9: two register sets in the k walk (chunk c + 1 in flight while c is unpacked; 128 registers,
// 4 CTAs per SM: the 384 CTAs of a V4-Flash GEMM at T = 1 run in one wave);
// 10: three (two chunks in flight: for the load latency at T = 1, where each SM holds only ~12
// warps; up to 168 registers, 3 CTAs per SM).
bool launch_gemv_mxfp4(const Args& a, int tactic) {
  if (tactic == 10) return launch_gemv<kMxfp4, 2, 2, 2, 3>(a);
  return launch_gemv<kMxfp4, 2, 2, 2, 2>(a);
}

}  // namespace dsa::ops::cuda::egemm
