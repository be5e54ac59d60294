// FP8 (e4m3, 128x128 block scales, fp32 or UE8M0) instantiations of the grouped expert GEMM's
// tile kernel (expert_gemm_kernel.cuh).
#include "dsa/ops/moe/cuda/expert_gemm_kernel.cuh"

namespace dsa::ops::cuda::egemm {

// tile 0: 16 x 64, 4 stages (~49 KB); tile 1: 64 x 64, 3 stages (~74 KB). (64 x 128 needs 255
// registers with the per-chunk fp32 partial sums and spills on sm_90a, so the FP8 prefill tile is
// narrower than the MXFP4 one.) tile 2: tile 0 with 8 warps splitting every chunk's k in two.
// Plus the CTA's scale table (BN/8 x K/128 fp32). Tactics 3-8: expert_gemm_stream_fp8.cu.
bool launch_fp8(const Args& a, int tactic) {
  if (tactic >= 3) return launch_stream_fp8(a, tactic);
  if (tactic == 0) return launch<kFp8, 16, 2, 4>(a);
  if (tactic == 1) return launch<kFp8, 64, 2, 3>(a);
  return launch<kFp8, 16, 2, 4, 2>(a);
}

}  // namespace dsa::ops::cuda::egemm
