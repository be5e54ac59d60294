// MXFP4 instantiations of the decode stream kernel (expert_gemm_stream_kernel.cuh).
#include "dsa/ops/moe/cuda/expert_gemm_stream_kernel.cuh"

namespace dsa::ops::cuda::egemm {

// 3: 8 token rows x 128 weight rows (2 groups of 16 per warp), 4 stages (~43 KB);
// 4: 8 token rows x 64 weight rows with 8 warps splitting every chunk's k (T = 1: twice the CTAs
//    of tactic 3 for the few experts used, and more warps per byte);
// 5: 16 token rows (two MMA column tiles: experts with 9-16 rows, T ~ 128);
// 6: 8 token rows x 64 weight rows, 6 stages (~32 KB: more CTAs and bytes in flight per SM).
bool launch_stream_mxfp4(const Args& a, int tactic) {
  if (tactic == 4) return launch_stream<kMxfp4, 1, 1, 4, 2>(a);
  if (tactic == 5) return launch_stream<kMxfp4, 2, 2, 4>(a);
  if (tactic == 6) return launch_stream<kMxfp4, 1, 1, 6>(a);
  return launch_stream<kMxfp4, 2, 1, 4>(a);
}

}  // namespace dsa::ops::cuda::egemm
