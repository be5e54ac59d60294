// Block-wide exclusive prefix sums of two int32 values per thread (the layout's aligned row
// counts and raw counts), shared by the layout kernels. Warp shuffle scans + one pass over the
// warp totals: two barriers instead of a serial loop over the experts.
#pragma once

namespace dsa::ops::cuda {

// blockDim.x must be a multiple of 32 (<= 1024); every thread of the block must call it.
// scratch: 64 ints of shared memory. Returns the exclusive prefixes (ea, ec) of (a, c) in thread
// order and the block totals (ta, tc). Ends with a barrier, so scratch may be reused at once.
__device__ __forceinline__ void block_exclusive_scan2(int a, int c, int* scratch, int& ea, int& ec, int& ta, int& tc) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
  int ia = a, ic = c;
#pragma unroll
  for (int off = 1; off < 32; off <<= 1) {
    const int ya = __shfl_up_sync(0xFFFFFFFFu, ia, off), yc = __shfl_up_sync(0xFFFFFFFFu, ic, off);
    if (lane >= off) ia += ya, ic += yc;
  }
  if (lane == 31) scratch[warp] = ia, scratch[32 + warp] = ic;
  __syncthreads();
  if (warp == 0) {
    int va = lane < nw ? scratch[lane] : 0, vc = lane < nw ? scratch[32 + lane] : 0;
#pragma unroll
    for (int off = 1; off < 32; off <<= 1) {
      const int ya = __shfl_up_sync(0xFFFFFFFFu, va, off), yc = __shfl_up_sync(0xFFFFFFFFu, vc, off);
      if (lane >= off) va += ya, vc += yc;
    }
    scratch[lane] = va, scratch[32 + lane] = vc;  // inclusive prefixes over the warps
  }
  __syncthreads();
  ea = (warp > 0 ? scratch[warp - 1] : 0) + ia - a;
  ec = (warp > 0 ? scratch[32 + warp - 1] : 0) + ic - c;
  ta = scratch[nw - 1];
  tc = scratch[32 + nw - 1];
  __syncthreads();
}

}  // namespace dsa::ops::cuda
