// FP8 (e4m3, 128x128 block scales, fp32 or UE8M0) instantiations of the grouped expert GEMM's
// tile kernel (expert_gemm_kernel.cuh).
#include "dsa/ops/moe/cuda/expert_gemm_kernel.cuh"

namespace dsa::ops::cuda::egemm {

// tile 0: 16 x 64, 4 stages (~49 KB); tile 1: 64 x 64, 3 stages (~74 KB). (64 x 128 needs 255
// registers with the per-chunk fp32 partial sums and spills on sm_90a, so the FP8 prefill tile is
// narrower than the MXFP4 one.) tile 2: tile 0 with 8 warps splitting every chunk's k in two.
// Plus the CTA's scale table (BN/8 x its K/128 chunks fp32). Tactics 3-8: expert_gemm_stream_fp8.cu; 9-10:
// expert_gemm_gemv_fp8.cu.
//
// Dense calls of at most 32 rows (decode batches of 17-32 tokens of the FP8 linears) run tile 1
// as 32 x 128, 3 stages (72 KB): the 64-row tile would spend half its MMAs on rows that do not
// exist, and its 64 weight rows per CTA make every CTA re-read the whole activation slice from
// L2 for as many bytes as it streams of weights (2 x 32 rows x 2 bytes per k against 64 x 1);
// 128 weight rows halve that. Grouped (MoE) calls keep 64 x 64 (segments are 64-aligned).
bool launch_fp8(const Args& a, int tactic) {
  if (tactic >= 9) return launch_gemv_fp8(a, tactic);
  if (tactic >= 3) return launch_stream_fp8(a, tactic);
  if (tactic == 0) return launch<kFp8, 16, 2, 4>(a);
  if (tactic == 1) {
    if (!a.m_indices && a.rows <= 32) return launch<kFp8, 32, 4, 3>(a);
    return launch<kFp8, 64, 2, 3>(a);
  }
  return launch<kFp8, 16, 2, 4, 2>(a);
}

}  // namespace dsa::ops::cuda::egemm
