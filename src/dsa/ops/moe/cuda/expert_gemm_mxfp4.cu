// MXFP4 instantiations of the grouped expert GEMM (expert_gemm_kernel.cuh).
#include "dsa/ops/moe/cuda/expert_gemm_kernel.cuh"

namespace dsa::ops::cuda::egemm {

// tile 0: 16 rows x 64 weight rows, 4 stages (decode: many CTAs stream weights, ~34 KB smem).
// tile 1: 64 rows x 128 weight rows, 3 stages (prefill: more reuse per weight byte, ~75 KB).
// tile 2: tile 0 with 8 warps splitting every chunk's k in two (more warps per byte when only a
// few CTAs exist, e.g. T=1).
void launch_mxfp4(const Args& a, int tile) {
  if (tile == 0)
    launch<kMxfp4, 16, 2, 4>(a);
  else if (tile == 1)
    launch<kMxfp4, 64, 4, 3>(a);
  else
    launch<kMxfp4, 16, 2, 4, 2>(a);
}

}  // namespace dsa::ops::cuda::egemm
