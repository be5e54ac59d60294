// Compressor pooling on the GPU (compressor.h). One thread per output dimension k in [0, d):
// the thread owns state columns k (and d + k with overlap), walks the T tokens in position
// order, writes each token's kv and score + ape into the open-window rows, and when a window
// closes computes the softmax-pooled value of dimension k over the window's rows (the previous
// window's Ca column k and the open window's Cb column d + k for m = 4; column k of the open
// window for m = 128), then shifts the open rows into the previous-window rows. Dimensions are
// independent (the softmax runs per dimension), so no synchronisation is needed; the RMSNorm and
// RoPE of the emitted entries are separate launches (norm.cu, rope.cu). Reads of kv/score are
// coalesced across the threads of a token row. Launch: ceil(d / 128) CTAs of 128 threads. The
// work per call is small (decode: one token per request); prefill chunks loop over T per thread.
#include "dsa/core/pdl.cuh"
#include <cmath>

#include "dsa/ops/compressor/compressor_cuda.h"
#include "dsa/ops/norm/cuda_elem.cuh"
#include "dsa/core/cuda_launch.h"
#include "dsa/core/cuda_stream.h"

namespace dsa::ops::cuda {
namespace {

constexpr int kThreads = 128;

__global__ void pool_kernel(CompressorPoolArgs a) {
  pdl::entry();
  const int64_t k = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t m = a.ratio, d = a.head_dim, coff = a.overlap ? 2 : 1, W = coff * d;
  if (k >= d) return;
  const int64_t open = a.overlap ? m : 0;
  int64_t emitted = 0;
  for (int64_t t = 0; t < a.tokens; ++t) {
    const int64_t pos = a.start_pos + t, slot = pos % m;
    for (int64_t c = k; c < W; c += d) {  // columns k and (overlap) d + k
      a.state_kv[(open + slot) * W + c] = ld(a.kv, a.kv_dtype, t * W + c);
      a.state_score[(open + slot) * W + c] = ld(a.score, a.score_dtype, t * W + c) + a.ape[slot * W + c];
    }
    if (slot != m - 1) continue;
    // rows pooled for dimension k: (row, column) pairs
    const int64_t nrows = coff * m;
    float mx = -INFINITY;
    for (int64_t r = 0; r < nrows; ++r) {
      const int64_t c = a.overlap ? (r < m ? k : d + k) : k;
      mx = fmaxf(mx, a.state_score[r * W + c]);
    }
    float den = 0.f, num = 0.f;
    for (int64_t r = 0; r < nrows; ++r) {
      const int64_t c = a.overlap ? (r < m ? k : d + k) : k;
      const float s = a.state_score[r * W + c];
      if (s == -INFINITY) continue;  // no token in this row (first window): weight 0
      const float e = expf(s - mx);
      den += e;
      num = fmaf(e, a.state_kv[r * W + c], num);
    }
    a.pooled[emitted * d + k] = num / den;
    ++emitted;
    if (a.overlap) {
      for (int64_t r = 0; r < m; ++r)
        for (int64_t c = k; c < W; c += d) {
          a.state_kv[r * W + c] = a.state_kv[(m + r) * W + c];
          a.state_score[r * W + c] = a.state_score[(m + r) * W + c];
        }
    }
  }
}

}  // namespace

void compressor_pool(const CompressorPoolArgs& a) {
  if (a.tokens == 0 || a.head_dim == 0) return;
  const int64_t blocks = (a.head_dim + kThreads - 1) / kThreads;
  pdl::launch(pool_kernel, static_cast<unsigned>(blocks), kThreads, 0, DSA_CURRENT_STREAM, a);
  cuda_launch::check_launch("compressor pool_kernel");
}

}  // namespace dsa::ops::cuda
