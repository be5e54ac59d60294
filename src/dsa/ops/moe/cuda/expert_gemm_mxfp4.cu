// MXFP4 instantiations of the grouped expert GEMM's tile kernel (expert_gemm_kernel.cuh).
#include "dsa/ops/moe/cuda/expert_gemm_kernel.cuh"

namespace dsa::ops::cuda::egemm {

// tile 0: 16 rows x 64 weight rows, 4 stages (decode: many CTAs stream weights, ~34 KB smem).
// tile 1: 64 rows x 128 weight rows, 3 stages (prefill: more reuse per weight byte, ~75 KB).
// tile 2: tile 0 with 8 warps splitting every chunk's k in two (more warps per byte when only a
// few CTAs exist, e.g. T=1). Tactics 3-8: the stream kernel (expert_gemm_stream_mxfp4.cu);
// 9-10: the register-streaming kernel (expert_gemm_gemv_mxfp4.cu).
bool launch_mxfp4(const Args& a, int tactic) {
  if (tactic >= 9) return launch_gemv_mxfp4(a, tactic);
  if (tactic >= 3) return launch_stream_mxfp4(a, tactic);
  if (tactic == 0) return launch<kMxfp4, 16, 2, 4>(a);
  if (tactic == 1) return launch<kMxfp4, 64, 4, 3>(a);
  return launch<kMxfp4, 16, 2, 4, 2>(a);
}

}  // namespace dsa::ops::cuda::egemm
