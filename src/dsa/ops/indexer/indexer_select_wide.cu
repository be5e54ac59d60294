// The wide top-k selection's first two launches (indexer_cuda.h, topk_select_wide_prepare): they
// cut a long row down to the few entries that can still be among its top k, so that the one CTA
// per row of select_kernel (indexer.cu) radix-selects over thousands of candidates instead of
// the whole row. At decode a step has one to a few rows of 32K-262K entries (the CSA indexer at
// 128K-1M tokens, GLM at 128K-200K): one CTA per row streamed every entry 4-5 times and cost
// ~2 ns per entry (+250 us per GLM layer at 128K on the H200), while the rest of the GPU idled.
//
// The digit of entry e is the top 12 bits of ordered_bits(score[e]) (sign, exponent, 3 mantissa
// bits: larger digit = larger score). Only rows with more than topk visible entries are cut.
// wide_hist_kernel: grid (T, ceil(N / kSegment)), 256 threads. CTA (t, s) counts the digits of
//   the visible entries of its segment in a shared 4096-bin histogram (one shared atomic per
//   group of lanes sharing a digit: entries of one row share their top bits) and adds the
//   non-zero bins to the row's global histogram (integer atomics: the sums, hence everything
//   after, do not depend on the order).
// wide_compact_kernel: the same grid. Every CTA finds, from the row's histogram, the digit B with
//   count(digit > B) < topk <= count(digit >= B) (the same B in every CTA: a fixed-order scan)
//   and appends the entries of its segment with digit >= B to the row's candidate list (one
//   global atomic per warp; the list's order varies from run to run, the selection over it does
//   not: select_kernel ranks unique (score, index) keys and sorts its output).
// The candidates are every entry that can be among the top k: every entry with a larger digit
// than B is, and the k-th largest has digit B.
#include "dsa/core/pdl.cuh"
#include <cstdint>

#include "dsa/core/cuda_launch.h"
#include "dsa/core/cuda_stream.h"
#include "dsa/ops/common/block_select.cuh"
#include "dsa/ops/indexer/indexer_cuda.h"
#include "dsa/ops/indexer/visible_entries.cuh"

namespace dsa::ops::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kSegment = 2048;  // entries per CTA: 8 per thread, 64 CTAs for a 128K-entry row
constexpr int kBins = kIndexerWideBins;
constexpr int kBinsPerThread = kBins / kThreads;

__device__ __forceinline__ uint32_t digit_of(float v) { return ordered_bits(v) >> (32 - kIndexerWideDigitBits); }

__global__ void __launch_bounds__(kThreads) wide_hist_kernel(const __grid_constant__ TopkSelectArgs a) {
  pdl::entry();
  __shared__ uint32_t hist[kBins];
  const int64_t t = blockIdx.x;
  const int64_t visible = visible_entries(a.positions, a.positions_i64, t, a.ratio, a.N);
  const int64_t e0 = static_cast<int64_t>(blockIdx.y) * kSegment;
  if (visible <= a.topk || e0 >= visible) return;  // uniform over the CTA
  for (int i = threadIdx.x; i < kBins; i += kThreads) hist[i] = 0;
  __syncthreads();
  const float* row = a.scores + t * a.N;
  const int lane = threadIdx.x & 31;
  // Warp-uniform trip count (the collectives below need every lane).
  for (int64_t base = e0 + threadIdx.x - lane; base < e0 + kSegment; base += kThreads) {
    const int64_t e = base + lane;
    const bool take = e < visible;
    const unsigned want = __ballot_sync(0xffffffffu, take);
    if (take) {
      const uint32_t d = digit_of(row[e]);
      const unsigned peers = __match_any_sync(want, d);
      if (__ffs(peers) - 1 == lane) atomicAdd(&hist[d], static_cast<uint32_t>(__popc(peers)));
    }
  }
  __syncthreads();
  uint32_t* g = a.wide_hist + t * (kBins + 1);
  for (int i = threadIdx.x; i < kBins; i += kThreads)
    if (hist[i] != 0) atomicAdd(&g[i], hist[i]);
}

__global__ void __launch_bounds__(kThreads) wide_compact_kernel(const __grid_constant__ TopkSelectArgs a) {
  pdl::entry();
  __shared__ uint32_t warp_sum[kThreads / 32];
  __shared__ uint32_t cut_s;
  const int64_t t = blockIdx.x;
  const int64_t visible = visible_entries(a.positions, a.positions_i64, t, a.ratio, a.N);
  const int64_t e0 = static_cast<int64_t>(blockIdx.y) * kSegment;
  if (visible <= a.topk || e0 >= visible) return;
  uint32_t* g = a.wide_hist + t * (kBins + 1);
  // 1. The cut digit B. Thread i owns the kBinsPerThread bins just below those of thread i - 1,
  //    thread 0 the highest: an exclusive prefix over the threads is the count above its bins.
  const int lane = threadIdx.x & 31, warp = threadIdx.x / 32;
  const int top = kBins - kBinsPerThread * threadIdx.x;  // bins [top - kBinsPerThread, top)
  uint32_t own = 0;
  for (int j = 1; j <= kBinsPerThread; ++j) own += g[top - j];
  uint32_t incl = own;
  for (int o = 1; o < 32; o <<= 1) {
    const uint32_t v = __shfl_up_sync(0xffffffffu, incl, o);
    if (lane >= o) incl += v;
  }
  if (lane == 31) warp_sum[warp] = incl;
  __syncthreads();
  uint32_t before = 0;
  for (int w = 0; w < warp; ++w) before += warp_sum[w];
  const int64_t above = static_cast<int64_t>(before + incl - own);
  if (above < a.topk && a.topk <= above + static_cast<int64_t>(own)) {  // exactly one thread
    int64_t left = a.topk - above;
    int d = top - 1;
    for (; d > top - kBinsPerThread; --d) {
      if (static_cast<int64_t>(g[d]) >= left) break;
      left -= g[d];
    }
    cut_s = static_cast<uint32_t>(d);
  }
  __syncthreads();
  const uint32_t cut = cut_s;
  // 2. Append this segment's entries with digit >= B.
  const float* row = a.scores + t * a.N;
  int32_t* cand = a.cand + t * a.N;
  for (int64_t base = e0 + threadIdx.x - lane; base < e0 + kSegment; base += kThreads) {
    const int64_t e = base + lane;
    const bool keep = e < visible && digit_of(row[e]) >= cut;
    const unsigned mask = __ballot_sync(0xffffffffu, keep);
    if (mask == 0) continue;
    uint32_t at = 0;
    if (lane == 0) at = atomicAdd(&g[kBins], static_cast<uint32_t>(__popc(mask)));
    at = __shfl_sync(0xffffffffu, at, 0);
    if (keep) cand[at + __popc(mask & ((1u << lane) - 1))] = static_cast<int32_t>(e);
  }
}

}  // namespace

void topk_select_wide_prepare(const TopkSelectArgs& a) {
  const int64_t segments = (a.N + kSegment - 1) / kSegment;
  if (a.T > 0x7fffffffLL || segments > 65535) cuda_launch::launch_error("topk_select: wide selection grid exceeds the launch limits");
  cudaStream_t s = DSA_CURRENT_STREAM;
  cuda_launch::check_status(
      cudaMemsetAsync(a.wide_hist, 0, static_cast<size_t>(a.T) * (kBins + 1) * sizeof(uint32_t), s),
      "topk_select: clearing the wide selection's histograms");
  const dim3 grid(static_cast<unsigned>(a.T), static_cast<unsigned>(segments));
  pdl::launch(wide_hist_kernel, grid, kThreads, 0, s, a);
  cuda_launch::check_launch("indexer wide_hist_kernel");
  pdl::launch(wide_compact_kernel, grid, kThreads, 0, s, a);
  cuda_launch::check_launch("indexer wide_compact_kernel");
}

}  // namespace dsa::ops::cuda
