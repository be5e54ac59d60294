// Interleaved (or half-split) RoPE in place (rope.h). One warp per (token, head) row; lane l handles pairs
// l, l+32, l+64, l+96 (rope_dim <= 256). Every lane reads all its pairs before a __syncwarp and
// only then writes, so the de-interleaved write order (which moves values across lanes) is safe
// in place. The angle and rotation are rope_math.cuh's (shared with the fused norm + RoPE kernels,
// so both give the same bits): the fp32 product float(pos) * inv_freq[i] without FMA contraction,
// exactly as the CPU reference forms it, full-precision sincosf. inv_freq travels in the kernel
// parameters (<= 512 B).
// Launch: 8 warps (256 threads) per CTA, grid = ceil(tokens * heads / 8).
#include "dsa/core/pdl.cuh"
#include "dsa/ops/norm/cuda_elem.cuh"
#include "dsa/core/cuda_launch.h"
#include "dsa/ops/rope/rope_cuda.h"
#include "dsa/ops/rope/rope_math.cuh"
#include "dsa/core/cuda_stream.h"

namespace dsa::ops::cuda {
namespace {

constexpr int kWarps = 8;
constexpr int kPairsPerLane = kRopeMaxPairs / 32;

__global__ void rope_kernel(const __grid_constant__ RopeArgs a) {
  pdl::entry();
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kWarps + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (row >= a.tokens * a.heads) return;  // whole warp exits together
  const int64_t t = row / a.heads, h = row % a.heads;
  const int64_t pos = !a.positions      ? a.pos_base + t * a.pos_step
                      : a.positions_i64 ? static_cast<const int64_t*>(a.positions)[t]
                                        : static_cast<const int32_t*>(a.positions)[t];
  const int64_t base = t * a.token_stride + h * a.head_stride;  // elements; a.x points at the slice start
  float y0[kPairsPerLane] = {}, y1[kPairsPerLane] = {};  // fixed-trip unrolled loops keep these in registers
#pragma unroll
  for (int j = 0; j < kPairsPerLane; ++j) {
    const int i = lane + 32 * j;
    if (i >= a.pairs) continue;
    const int64_t i0 = a.half_split ? i : 2 * i, i1 = a.half_split ? a.pairs + i : 2 * i + 1;
    const float x0 = ld(a.x, a.dtype, base + i0), x1 = ld(a.x, a.dtype, base + i1);
    rope_rotate_pair(x0, x1, pos, a.inv_freq[i], a.attention_factor, a.inverse, y0[j], y1[j]);
  }
  __syncwarp();
#pragma unroll
  for (int j = 0; j < kPairsPerLane; ++j) {
    const int i = lane + 32 * j;
    if (i >= a.pairs) continue;
    const int64_t o0 = a.deinterleave_out ? i : (a.half_split ? i : 2 * i);
    const int64_t o1 = a.deinterleave_out ? a.pairs + i : (a.half_split ? a.pairs + i : 2 * i + 1);
    st(a.x, a.dtype, base + o0, y0[j]);
    st(a.x, a.dtype, base + o1, y1[j]);
  }
}

}  // namespace

void rope(const RopeArgs& a) {
  if (a.pairs < 1 || a.pairs > kRopeMaxPairs) cuda_launch::launch_error("rope: rope_dim / 2 outside 1..128");
  const int64_t rows = a.tokens * a.heads;
  if (rows == 0) return;
  const int64_t blocks = (rows + kWarps - 1) / kWarps;
  if (blocks > 0x7fffffffLL) cuda_launch::launch_error("rope: too many rows for one grid");
  pdl::launch(rope_kernel, static_cast<unsigned>(blocks), kWarps * 32, 0, DSA_CURRENT_STREAM, a);
  cuda_launch::check_launch("rope_kernel");
}

}  // namespace dsa::ops::cuda
