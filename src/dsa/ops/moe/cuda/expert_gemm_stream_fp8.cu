// FP8 instantiations of the decode stream kernel (expert_gemm_stream_kernel.cuh); every one adds
// the CTA's fp32 scale table (BN/8 x K/128) to the shared memory below.
#include "dsa/ops/moe/cuda/expert_gemm_stream_kernel.cuh"

namespace dsa::ops::cuda::egemm {

// 3: 8 token rows x 64 weight rows, 4 stages (~41 KB);
// 4: tactic 3 with 8 warps splitting every chunk's k (T = 1);
// 5: 16 token rows (two MMA column tiles), 4 stages (~49 KB);
// 6: 8 token rows x 128 weight rows (2 groups of 16 per warp), 3 stages (~55 KB).
bool launch_stream_fp8(const Args& a, int tactic) {
  if (tactic == 4) return launch_stream<kFp8, 1, 1, 4, 2>(a);
  if (tactic == 5) return launch_stream<kFp8, 1, 2, 4>(a);
  if (tactic == 6) return launch_stream<kFp8, 2, 1, 3>(a);
  return launch_stream<kFp8, 1, 1, 4>(a);
}

}  // namespace dsa::ops::cuda::egemm
