// Raw launchers of the linear-layer kernels (act_quant.cu); no Tensor/fmt here (see
// dsa/ops/moe/cuda/kernels.h for why). Default stream.
#pragma once
#include <cstdint>

namespace dsa::ops::cuda {

// Per 1x128 block of x (bf16 [T][K]): e4m3 values q, fp32 scales (at kb*T + t when mn_major,
// else t*(K/128) + kb) and the fake-quantized bf16 copy deq; null outputs are skipped.
void launch_act_quant(const void* x, int64_t T, int64_t K, uint8_t* q, float* scales, bool mn_major, void* deq);
// Weight block scales [NB][KB] (fp32 or UE8M0) -> fp32 in layout 0 (same order) or
// [KB][ld] (nb fastest, ld >= NB).
void launch_weight_scales(const void* in, bool in_f32, int64_t NB, int64_t KB, int layout, int64_t ld, float* out);

}  // namespace dsa::ops::cuda
