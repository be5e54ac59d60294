// Host entry points of the expert GEMM instantiations (one .cu per weight format).
#pragma once
#include <cstdint>

namespace dsa::ops::cuda::egemm {
struct Args;
void launch_mxfp4(const Args& a, int tile);
void launch_fp8(const Args& a, int tile);
void ue8m0_to_f32(const uint8_t* in, float* out, int64_t n);
}  // namespace dsa::ops::cuda::egemm
