// The batched compressor (compressor_batch.h) on the GPU: one CTA per request of the step,
// blockDim = head_dim rounded up to a warp (<= 512 threads). Thread k owns state columns k (and
// d + k with overlap) of the request's slot, exactly as the per-request pool kernel does
// (compressor.cu), and walks the request's tokens in position order. When a window closes, the
// pooled value of every dimension is RMS-normalised over the row (block reduction), rounded to
// the output dtype, rotated (interleaved RoPE on the trailing rope_dim dims at the window's first
// position, partner values exchanged through shared memory) and stored in the request's entry
// rows. A request starting at position 0 first clears its slot (kv 0, score -inf), so the engine
// never initialises state memory. All metadata is read on the device: nothing waits for the host.
#include "dsa/core/pdl.cuh"
#include <cmath>
#include <cstdint>

#include "dsa/core/cuda_stream.h"
#include "dsa/ops/compressor/compressor_cuda.h"
#include "dsa/ops/norm/cuda_elem.cuh"
#include "dsa/core/cuda_launch.h"

namespace dsa::ops::cuda {
namespace {

__global__ void __launch_bounds__(kCompressorMaxHeadDim) batch_kernel(const __grid_constant__ CompressorBatchArgs a) {
  pdl::entry();
  __shared__ float scratch[32];
  __shared__ float row[kCompressorMaxHeadDim];
  const int64_t r = blockIdx.x;
  const int64_t m = a.ratio, d = a.head_dim, coff = a.overlap ? 2 : 1, W = coff * d, nrows = coff * m;
  const int32_t slot = a.state_slots[r];
  if (slot < 0 || slot >= a.num_slots) return;  // uniform: a bad slot leaves everything untouched
  float* skv = reinterpret_cast<float*>(a.state + static_cast<int64_t>(slot) * a.slot_bytes);
  float* ssc = skv + nrows * W;
  const int64_t q0 = a.query_start[r], q1 = a.query_start[r + 1], start = a.cached_lens[r];
  const int64_t e0 = a.entry_start[r], e1 = a.entry_start[r + 1] < a.out_rows ? a.entry_start[r + 1] : a.out_rows;
  const int64_t k = threadIdx.x;
  const bool active = k < d;
  const int64_t open = a.overlap ? m : 0;
  if (start == 0 && active) {
    for (int64_t i = 0; i < nrows; ++i)
      for (int64_t c = k; c < W; c += d) {
        skv[i * W + c] = 0.f;
        ssc[i * W + c] = -INFINITY;
      }
  }
  const int64_t rope_off = d - a.rope_dim;
  int64_t e = e0;
  for (int64_t t = q0; t < q1; ++t) {
    const int64_t pos = start + (t - q0), wslot = pos % m;
    if (active)
      for (int64_t c = k; c < W; c += d) {
        skv[(open + wslot) * W + c] = ld(a.kv, a.kv_dtype, t * W + c);
        ssc[(open + wslot) * W + c] = ld(a.score, a.score_dtype, t * W + c) + a.ape[wslot * W + c];
      }
    if (wslot != m - 1) continue;  // uniform over the block
    float pooled = 0.f;
    if (active) {
      float mx = -INFINITY;
      for (int64_t i = 0; i < nrows; ++i) mx = fmaxf(mx, ssc[i * W + (a.overlap && i >= m ? d + k : k)]);
      float den = 0.f, num = 0.f;
      for (int64_t i = 0; i < nrows; ++i) {
        const int64_t c = a.overlap && i >= m ? d + k : k;
        const float s = ssc[i * W + c];
        if (s == -INFINITY) continue;  // no token in this row (first window): weight 0
        const float w = expf(s - mx);
        den += w;
        num = fmaf(w, skv[i * W + c], num);
      }
      pooled = num / den;
      if (a.overlap)  // the closed window becomes the previous window of the next one
        for (int64_t i = 0; i < m; ++i)
          for (int64_t c = k; c < W; c += d) {
            skv[i * W + c] = skv[(m + i) * W + c];
            ssc[i * W + c] = ssc[(m + i) * W + c];
          }
    }
    if (e >= e1) continue;  // no row for this entry (the CPU path reports the mismatch)
    const float ss = block_sum(active ? pooled * pooled : 0.f, scratch);
    const float inv = 1.0f / sqrtf(ss / static_cast<float>(d) + a.eps);
    float y = 0.f;
    if (active) {
      y = pooled * inv * ld(a.norm_weight, a.norm_dtype, k);
      if (a.out_dtype == DType::BF16) y = bf16_bits_to_f32(f32_to_bf16_bits(y));  // the entry dtype, as stored
      row[k] = y;
    }
    __syncthreads();
    if (active && k >= rope_off) {
      const int64_t j = k - rope_off, pair = j / 2;
      const float x0 = row[rope_off + 2 * pair], x1 = row[rope_off + 2 * pair + 1];
      const float angle = __fmul_rn(static_cast<float>(pos + 1 - m), a.inv_freq[pair]);
      float s, c;
      sincosf(angle, &s, &c);
      c *= a.attention_factor;
      s *= a.attention_factor;
      y = (j % 2 == 0) ? x0 * c - x1 * s : x1 * c + x0 * s;
    }
    if (active) st(a.out, a.out_dtype, e * d + k, y);
    __syncthreads();  // row[] is rewritten by the next entry
    ++e;
  }
}

}  // namespace

void compressor_batch(const CompressorBatchArgs& a) {
  if (a.requests == 0) return;
  if (a.head_dim < 1 || a.head_dim > kCompressorMaxHeadDim)
    cuda_launch::launch_error("compressor_batch: head_dim outside 1..512");
  if (a.rope_dim < 0 || a.rope_dim > 2 * kCompressorMaxRopePairs || a.rope_dim > a.head_dim || a.rope_dim % 2)
    cuda_launch::launch_error("compressor_batch: rope_dim must be even and <= min(head_dim, 128)");
  if (a.requests > 0x7fffffffLL) cuda_launch::launch_error("compressor_batch: too many requests for one grid");
  const int threads = static_cast<int>((a.head_dim + 31) / 32 * 32);
  pdl::launch(batch_kernel, static_cast<unsigned>(a.requests), threads, 0, DSA_CURRENT_STREAM, a);
  cuda_launch::check_launch("compressor batch_kernel");
}

}  // namespace dsa::ops::cuda
