// The register-resident top-k select (indexer_cuda.h, topk_select_fast): the same result as
// select_kernel (indexer.cu), for rows of at most kIndexerFastMaxEntries entries (decode of GLM at
// 4K-16K tokens, the V4 CSA indexer at up to 64K tokens). select_kernel spent ~45 us on the top
// 2048 of 4109 on the H200: up to 8 radix passes over the row in global memory (3 block syncs
// each), then 66 bitonic stages, each a block sync.
//
// fast_select_kernel<kPer>: grid (T), kFastThreads threads, one CTA per row.
//   The row's visible entries are loaded once: thread j holds entries [j*P, j*P + P) (P =
//   ceil(visible / kFastThreads) <= kPer) as 32-bit order-preserving keys (ordered_bits) in
//   registers, so "lower index" = lower thread, then lower register.
//   1. The k-th largest key thr over the 32 key bits: up to 4 passes of 8-bit digits (a 256-bin
//      shared histogram of the keys sharing the prefix so far, double-buffered so that the next
//      one is cleared while this one is counted; one warp finds the digit holding the rank: 2
//      syncs a pass). It stops when the bin holding the rank is taken whole (whole: every key >=
//      the prefix is chosen); else after 4 passes thr is the exact k-th value, every key > thr is
//      chosen and, of the keys == thr, the `left` of lowest index. When k = visible, thr is the
//      row's minimum (whole). No pass re-reads global memory.
//   2. Ties at thr (only when not whole): a block prefix sum of each thread's count of keys ==
//      thr gives each one its rank by index; those of rank < left are the last `left` outputs, in
//      index order (they all have the smallest chosen value).
//   3. The other chosen keys G (> thr, or >= thr when whole; k - left of them) are ordered by a
//      bucket sort: bucket b = (key - thr) >> shift, shift the least with (max - thr) >> shift <
//      kBuckets (or linear in the score when thr <= 0 < max: Buckets), so a larger bucket holds
//      larger values. A histogram of the buckets, a block
//      exclusive sum over them (descending) and a scatter through per-bucket cursors put every
//      bucket's keys (as unique 64-bit (value, index) keys) in its slot range; an entry's output
//      slot is then its bucket start plus the number of keys of its bucket above its own. Scores
//      of a decode row spread over many buckets (a few keys each); when some bucket holds more
//      than kMaxBucket (few distinct values, a far outlier), the chosen keys are bitonic-sorted
//      instead (block_sort_desc), the same order.
//   Every count is an integer sum independent of the order of atomics, and every output slot is a
//   function of the unique keys alone: deterministic and equal to select_kernel and the CPU.
//   About 10 block syncs in all for distinct scores.
#include "dsa/core/pdl.cuh"
#include <cstdint>

#include "dsa/core/cuda_launch.h"
#include "dsa/core/cuda_stream.h"
#include "dsa/ops/common/block_select.cuh"
#include "dsa/ops/indexer/indexer_cuda.h"
#include "dsa/ops/indexer/visible_entries.cuh"

namespace dsa::ops::cuda {
namespace {

constexpr int kFastThreads = 1024;
constexpr int kWarps = kFastThreads / 32;
constexpr int kBuckets = 2048;  // two per thread
constexpr uint32_t kMaxBucket = 32;
static_assert(kIndexerFastMaxEntries % kFastThreads == 0 && kIndexerMaxTopk <= kBuckets);

struct alignas(16) FastShared {  // 16: the radix histograms are read as uint4
  uint32_t hist[2][256];           // radix digit counts (double-buffered)
  uint32_t cursor[kBuckets];       // bucket counts, then scatter cursors (bucket ends once scattered)
  uint32_t start[kBuckets];        // bucket starts (output slots)
  uint64_t keys[kIndexerMaxTopk];  // the chosen keys, by bucket (or bitonic-sorted)
  uint32_t warp_a[kWarps], warp_b[kWarps];
  uint32_t prefix, remaining;
  int whole;
};

// Exclusive prefix sum of v over the block (thread order) and the block total; one sync. `tmp`
// holds kWarps words that no other thread reads or writes around the call.
__device__ __forceinline__ uint32_t block_exclusive_sum(uint32_t v, uint32_t* tmp, uint32_t& total) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  uint32_t incl = v;
  for (int o = 1; o < 32; o <<= 1) {
    const uint32_t u = __shfl_up_sync(0xffffffffu, incl, o);
    if (lane >= o) incl += u;
  }
  if (lane == 31) tmp[warp] = incl;
  __syncthreads();
  const uint32_t w = tmp[lane];  // kWarps == 32
  uint32_t wincl = w;
  for (int o = 1; o < 32; o <<= 1) {
    const uint32_t u = __shfl_up_sync(0xffffffffu, wincl, o);
    if (lane >= o) wincl += u;
  }
  total = __shfl_sync(0xffffffffu, wincl, 31);
  const uint32_t before = __shfl_sync(0xffffffffu, wincl - w, warp);
  return before + incl - v;
}

__device__ __forceinline__ uint64_t key64(uint32_t bits, int64_t e) {
  return (static_cast<uint64_t>(bits) << 32) | (0xffffffffu - static_cast<uint32_t>(e));
}

// The value of an ordered_bits key (-0 comes back as +0).
__device__ __forceinline__ float key_value(uint32_t kk) {
  return __uint_as_float((kk & 0x80000000u) ? (kk & 0x7fffffffu) : ~kk);
}

// Bucket of a chosen key kk in [lo, hi], in [0, kBuckets): non-decreasing in kk, so larger buckets
// hold larger values. Linear in the score when lo <= 0 < hi (both finite; lo = 0: rows of relu
// zeros): the key bits there span every binade of tiny magnitudes and would crowd the real ones
// into few buckets. Else linear in
// the key bits (log-like across binades: a far outlier costs fewer buckets than a linear map).
struct Buckets {
  uint32_t lo;
  int shift;
  bool linear;
  float vlo, scale;
  __device__ Buckets(uint32_t lo_, uint32_t hi) : lo(lo_) {
    const uint32_t range = hi - lo;
    const int bits = range == 0 ? 0 : 32 - __clz(range);
    shift = bits > 11 ? bits - 11 : 0;  // kBuckets = 2^11
    vlo = key_value(lo);
    const float vhi = key_value(hi);
    linear = vlo <= 0.f && vhi > 0.f && isfinite(vlo) && isfinite(vhi);
    scale = linear ? __fdiv_rn(static_cast<float>(kBuckets), __fsub_rn(vhi, vlo)) : 0.f;
  }
  __device__ __forceinline__ unsigned operator()(uint32_t kk) const {
    if (!linear) return (kk - lo) >> shift;
    // Correctly rounded subtraction and product: monotone in the value, identical at every call.
    const unsigned b = __float2uint_rz(__fmul_rn(__fsub_rn(key_value(kk), vlo), scale));
    return b < kBuckets ? b : kBuckets - 1;
  }
};

template <int kPer>
__global__ void __launch_bounds__(kFastThreads) fast_select_kernel(const __grid_constant__ TopkSelectArgs a) {
  pdl::entry();
  static_assert(kFastThreads == 32 * 32, "one warp's lanes scan the warp totals");
  __shared__ FastShared s;
  const int64_t t = blockIdx.x;
  const int lane = threadIdx.x & 31;
  const float* row = a.scores + t * a.N;
  int32_t* out = a.indices + t * a.topk;
  const int64_t visible = visible_entries(a.positions, a.positions_i64, t, a.ratio, a.N);
  const int64_t k = visible < a.topk ? visible : a.topk;
  for (int64_t i = threadIdx.x; i < a.topk; i += kFastThreads)
    if (i >= k) out[i] = -1;
  if (k == 0) return;  // uniform over the CTA

  // Load: thread j holds entries [j*P, j*P + cnt).
  const int P = static_cast<int>((visible + kFastThreads - 1) / kFastThreads);
  const int64_t e0 = static_cast<int64_t>(threadIdx.x) * P;
  const int cnt = e0 >= visible ? 0 : (visible - e0 < P ? static_cast<int>(visible - e0) : P);
  uint32_t key[kPer];
  uint32_t kmax = 0, kmin = 0xffffffffu;
#pragma unroll
  for (int i = 0; i < kPer; ++i) {
    key[i] = i < cnt ? ordered_bits(row[e0 + i]) : 0;
    if (i < cnt) kmax = max(kmax, key[i]), kmin = min(kmin, key[i]);
  }
  for (int i = threadIdx.x; i < 256; i += kFastThreads) s.hist[0][i] = 0;
  for (int i = threadIdx.x; i < kBuckets; i += kFastThreads) s.cursor[i] = 0;
  if (threadIdx.x == 0) {
    s.prefix = 0;
    s.remaining = static_cast<uint32_t>(k);
    s.whole = 0;
  }
  kmax = __reduce_max_sync(0xffffffffu, kmax);
  kmin = __reduce_min_sync(0xffffffffu, kmin);
  if (lane == 0) s.warp_a[threadIdx.x >> 5] = kmax, s.warp_b[threadIdx.x >> 5] = kmin;
  __syncthreads();
  kmax = __reduce_max_sync(0xffffffffu, s.warp_a[lane]);
  kmin = __reduce_min_sync(0xffffffffu, s.warp_b[lane]);

  // 1. The threshold.
  uint32_t thr = kmin;
  uint32_t left = 0;  // keys == thr still to take (not whole)
  bool whole = true;
  if (visible > a.topk) {
    for (int pass = 0; pass < 4; ++pass) {
      const int shift = 24 - 8 * pass;
      const uint32_t hmask = pass == 0 ? 0u : (0xffffffffu << (shift + 8));
      const uint32_t prefix = s.prefix;
      uint32_t* hist = s.hist[pass & 1];
      for (int i = threadIdx.x; i < 256; i += kFastThreads) s.hist[(pass + 1) & 1][i] = 0;
#pragma unroll
      for (int i = 0; i < kPer; ++i) {
        if (i >= P) break;  // uniform: every lane reaches the collectives
        const bool take = i < cnt && (key[i] & hmask) == prefix;
        const unsigned want = __ballot_sync(0xffffffffu, take);
        if (take) {
          const unsigned digit = (key[i] >> shift) & 0xffu;
          const unsigned peers = __match_any_sync(want, digit);
          if (__ffs(peers) - 1 == lane) atomicAdd(&hist[digit], static_cast<uint32_t>(__popc(peers)));
        }
      }
      __syncthreads();
      if (threadIdx.x < 32) {
        // Lane l owns digits [8l, 8l + 8); suffix sums over the lanes give the count above.
        const uint4 lo = reinterpret_cast<const uint4*>(hist)[2 * lane];
        const uint4 hi = reinterpret_cast<const uint4*>(hist)[2 * lane + 1];
        const uint32_t c[8] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
        const uint32_t own = lo.x + lo.y + lo.z + lo.w + hi.x + hi.y + hi.z + hi.w;
        const uint32_t rem = s.remaining;
        __syncwarp();  // every lane has read s.remaining before one lane rewrites it below
        uint32_t incl = own;
        for (int o = 1; o < 32; o <<= 1) {
          const uint32_t v = __shfl_down_sync(0xffffffffu, incl, o);
          if (lane + o < 32) incl += v;
        }
        const uint32_t above = incl - own;
        if (above < rem && rem <= incl) {
          uint32_t lft = rem - above;
          int d = 7;
#pragma unroll
          for (int j = 7; j > 0; --j) {
            if (d == j && c[j] < lft) lft -= c[j], d = j - 1;
          }
          uint32_t cd = c[0];
#pragma unroll
          for (int j = 1; j < 8; ++j)
            if (d == j) cd = c[j];
          s.prefix = prefix | (static_cast<uint32_t>(8 * lane + d) << shift);
          s.remaining = lft;
          s.whole = cd == lft;  // every key of the bin is taken: its prefix is the threshold
        }
      }
      __syncthreads();
      if (s.whole) break;
    }
    thr = s.prefix;
    whole = s.whole != 0;
    left = whole ? 0 : s.remaining;
  }

  // 2. Ties at thr: the `left` of lowest index are the last outputs.
  if (!whole) {
    uint32_t n_eq = 0;
#pragma unroll
    for (int i = 0; i < kPer; ++i) n_eq += (i < cnt && key[i] == thr) ? 1u : 0u;
    uint32_t total;
    uint32_t rank = block_exclusive_sum(n_eq, s.warp_a, total);
    const int64_t base = k - left;
#pragma unroll
    for (int i = 0; i < kPer; ++i) {
      if (i < cnt && key[i] == thr) {
        if (rank < left) out[base + rank] = static_cast<int32_t>(e0 + i);
        ++rank;
      }
    }
  }

  // 3. The other chosen keys: bucket histogram. The bucket of a key is a non-decreasing function
  //    of it, computed the same way in all three places below.
  const Buckets bk(thr, kmax);
  auto chosen = [&](uint32_t kk) { return whole ? kk >= thr : kk > thr; };
#pragma unroll
  for (int i = 0; i < kPer; ++i) {
    if (i >= P) break;
    const bool take = i < cnt && chosen(key[i]);
    const unsigned want = __ballot_sync(0xffffffffu, take);
    if (take) {
      const unsigned b = bk(key[i]);
      const unsigned peers = __match_any_sync(want, b);
      if (__ffs(peers) - 1 == lane) atomicAdd(&s.cursor[b], static_cast<uint32_t>(__popc(peers)));
    }
  }
  __syncthreads();
  // Thread j owns buckets 2047 - 2j and 2046 - 2j (descending order): starts by an exclusive sum.
  const int b_hi = kBuckets - 1 - 2 * static_cast<int>(threadIdx.x), b_lo = b_hi - 1;
  const uint32_t c_hi = s.cursor[b_hi], c_lo = s.cursor[b_lo];
  const unsigned big = __ballot_sync(0xffffffffu, c_hi > kMaxBucket || c_lo > kMaxBucket);
  if (lane == 0) s.warp_b[threadIdx.x >> 5] = big;
  uint32_t n_g;
  const uint32_t st = block_exclusive_sum(c_hi + c_lo, s.warp_a, n_g);  // syncs: warp_b is visible
  const bool sort_all = __any_sync(0xffffffffu, s.warp_b[lane] != 0);
  s.start[b_hi] = st, s.cursor[b_hi] = st;
  s.start[b_lo] = st + c_hi, s.cursor[b_lo] = st + c_hi;
  __syncthreads();
  // Scatter.
#pragma unroll
  for (int i = 0; i < kPer; ++i) {
    if (i < cnt && chosen(key[i])) {
      const unsigned b = bk(key[i]);
      s.keys[atomicAdd(&s.cursor[b], 1u)] = key64(key[i], e0 + i);
    }
  }
  __syncthreads();
  if (sort_all) {  // uniform: some bucket is too full to rank by counting
    block_sort_desc(s.keys, static_cast<int>(n_g));
    for (uint32_t i = threadIdx.x; i < n_g; i += kFastThreads) out[i] = static_cast<int32_t>(key_index(s.keys[i]));
    return;
  }
  // Rank within the bucket: the keys of bucket b are s.keys[start[b], cursor[b]).
#pragma unroll
  for (int i = 0; i < kPer; ++i) {
    if (i < cnt && chosen(key[i])) {
      const unsigned b = bk(key[i]);
      const uint32_t lo = s.start[b], hi = s.cursor[b];
      const uint64_t mine = key64(key[i], e0 + i);
      uint32_t above = 0;
      for (uint32_t q = lo; q < hi; ++q) above += s.keys[q] > mine ? 1u : 0u;
      out[lo + above] = static_cast<int32_t>(e0 + i);
    }
  }
}

}  // namespace

void topk_select_fast(const TopkSelectArgs& a) {
  if (a.T == 0) return;
  if (a.topk > kIndexerMaxTopk || a.N > kIndexerFastMaxEntries || a.cand)
    cuda_launch::launch_error("topk_select_fast: topk > 2048, more than 16384 entries or a wide selection");
  if (a.T > 0x7fffffffLL) cuda_launch::launch_error("topk_select_fast: too many tokens for one grid");
  const unsigned grid = static_cast<unsigned>(a.T);
  cudaStream_t st = DSA_CURRENT_STREAM;
  const int64_t per = (a.N + kFastThreads - 1) / kFastThreads;
  if (per <= 4)
    pdl::launch(fast_select_kernel<4>, grid, kFastThreads, 0, st, a);
  else if (per <= 8)
    pdl::launch(fast_select_kernel<8>, grid, kFastThreads, 0, st, a);
  else
    pdl::launch(fast_select_kernel<16>, grid, kFastThreads, 0, st, a);
  cuda_launch::check_launch("indexer fast_select_kernel");
}

}  // namespace dsa::ops::cuda
