// BF16 (unquantized) instantiations of the grouped expert GEMM (expert_gemm_kernel.cuh): the
// weight tile is copied as it is and fed to the MMA without a dequantization step.
#include "dsa/ops/moe/cuda/expert_gemm_kernel.cuh"

namespace dsa::ops::cuda::egemm {

// bf16 weight rows take 256 bytes per 128-k chunk (2x FP8), so the stage counts are chosen to
// stay under SM120's 99 KB: tile 0: 16 x 64, 4 stages (80 KB); tile 1: 64 x 64, 3 stages
// (96 KB); tile 2: tile 0 with 8 warps splitting every chunk's k in two. The stream and GEMV
// kernels have no bf16 form: tactic 4 (k split) runs tile 2, the others (3, 5-10) tile 0.
bool launch_bf16(const Args& a, int tactic) {
  if (tactic == 1) return launch<kBf16, 64, 2, 3>(a);
  if (tactic == 2 || tactic == 4) return launch<kBf16, 16, 2, 4, 2>(a);
  return launch<kBf16, 16, 2, 4>(a);
}

}  // namespace dsa::ops::cuda::egemm
