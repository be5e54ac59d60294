// MXFP4 instantiations of the decode stream kernel (expert_gemm_stream_kernel.cuh).
#include "dsa/ops/moe/cuda/expert_gemm_stream_kernel.cuh"

namespace dsa::ops::cuda::egemm {

// All: 8 token rows per CTA. MW = weight row groups of 16 per warp (CTA: 64 MW rows), S = stages,
// KCH = 128-k chunks per stage (shared memory per CTA in brackets):
// 3: MW 1, S 4 (26 KB: up to 8 CTAs per SM);  4: tactic 3 with 8 warps splitting every chunk's k
// (T = 1: more warps per byte);  5: MW 1, S 3, KCH 2 (38 KB);  6: MW 1, S 6 (38 KB);
// 7: MW 1, S 4, KCH 2 (51 KB);  8: MW 2, S 4 (43 KB).
bool launch_stream_mxfp4(const Args& a, int tactic) {
  switch (tactic) {
    case 4: return launch_stream<kMxfp4, 1, 1, 4, 2>(a);
    case 5: return launch_stream<kMxfp4, 1, 1, 3, 1, 2>(a);
    case 6: return launch_stream<kMxfp4, 1, 1, 6>(a);
    case 7: return launch_stream<kMxfp4, 1, 1, 4, 1, 2>(a);
    case 8: return launch_stream<kMxfp4, 2, 1, 4>(a);
    default: return launch_stream<kMxfp4, 1, 1, 4>(a);
  }
}

}  // namespace dsa::ops::cuda::egemm
