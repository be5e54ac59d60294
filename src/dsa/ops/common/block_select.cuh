// Block-wide selection helpers shared by the kernels that pick the k largest of many scores (the
// indexer's top-k, the sampler's top-k / top-p): order-preserving 64-bit keys, a radix select of
// the k-th largest key and a bitonic sort in shared memory. Every thread of the block calls them
// (they synchronise the block); results are deterministic (integer counts, unique keys).
#pragma once
#include <cstdint>

namespace dsa::ops::cuda {

// Order-preserving map of a float to uint32 (larger float -> larger integer; -inf lowest; NaN
// above +inf for positive NaN: callers exclude NaN). -0 and +0 map to the same value.
__device__ __forceinline__ uint32_t ordered_bits(float f) {
  uint32_t u = __float_as_uint(f);
  if ((u & 0x7fffffffu) == 0) u = 0;
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

// Unique key of (value, index): larger value first, ties -> lower index first.
__device__ __forceinline__ uint64_t value_index_key(float v, int64_t i) {
  return (static_cast<uint64_t>(ordered_bits(v)) << 32) | (0xffffffffu - static_cast<uint32_t>(i));
}
__device__ __forceinline__ int64_t key_index(uint64_t key) {
  return static_cast<int64_t>(0xffffffffu - static_cast<uint32_t>(key & 0xffffffffu));
}

struct RadixScratch {
  uint32_t hist[256];
  uint64_t prefix;
  int64_t remaining;
  int done;
};

// A threshold key with exactly k (1 <= k <= n) of the n unique keys key(0..n-1) >= it: the k-th
// largest key, or, when the digit bin holding the rank is taken whole, the prefix of that bin
// (its lower bytes zero). Up to 8 passes over the key bytes, each a 256-bin shared-memory
// histogram of the keys that share the prefix found so far; warp 0 finds the digit holding the
// rank from suffix sums over its lanes (lane l owns digits [8l, 8l + 8)). The search stops as
// soon as the bin holding the rank is taken whole (for distinct float scores usually after 3-4
// passes rather than 8). Each pass reads the keys in batches of kBatch per thread (independent
// loads in flight instead of one memory latency per key) and counts with one shared atomic per
// group of lanes that share a digit (__match_any_sync): most keys share their top bytes, and
// per-lane atomics on one bin serialised the warp. blockDim.x must be a multiple of 32.
template <typename KeyFn>
__device__ uint64_t block_kth_largest(KeyFn key, int64_t n, int64_t k, RadixScratch& s) {
  constexpr int kBatch = 8;
  if (threadIdx.x == 0) {
    s.prefix = 0;
    s.remaining = k;
    s.done = 0;
  }
  __syncthreads();
  const int lane_id = threadIdx.x & 31;
  const int64_t stride = blockDim.x;
  for (int pass = 0; pass < 8; ++pass) {
    const int shift = 56 - 8 * pass;
    const uint64_t mask = pass == 0 ? 0 : (~uint64_t{0} << (shift + 8));
    for (int i = threadIdx.x; i < 256; i += blockDim.x) s.hist[i] = 0;
    __syncthreads();
    const uint64_t prefix = s.prefix;
    // Warp-uniform trip count: every lane reaches the warp collectives below.
    for (int64_t base = threadIdx.x - lane_id; base < n; base += stride * kBatch) {
      uint64_t kk[kBatch];
#pragma unroll
      for (int b = 0; b < kBatch; ++b) {
        const int64_t i = base + lane_id + b * stride;
        kk[b] = i < n ? key(i) : 0;
      }
#pragma unroll
      for (int b = 0; b < kBatch; ++b) {
        const int64_t i = base + lane_id + b * stride;
        const bool take = i < n && (kk[b] & mask) == prefix;
        const unsigned want = __ballot_sync(0xffffffffu, take);
        if (take) {
          const unsigned digit = static_cast<unsigned>((kk[b] >> shift) & 0xff);
          const unsigned peers = __match_any_sync(want, digit);
          if (__ffs(peers) - 1 == lane_id) atomicAdd(&s.hist[digit], static_cast<uint32_t>(__popc(peers)));
        }
      }
    }
    __syncthreads();
    if (threadIdx.x < 32) {
      const int lane = threadIdx.x;
      uint32_t own = 0;
      for (int j = 0; j < 8; ++j) own += s.hist[8 * lane + j];
      uint32_t incl = own;
      for (int o = 1; o < 32; o <<= 1) {
        const uint32_t v = __shfl_down_sync(0xffffffffu, incl, o);
        if (lane + o < 32) incl += v;
      }
      const int64_t above = static_cast<int64_t>(incl - own), rem = s.remaining;
      __syncwarp();  // every lane has read s.remaining before one lane rewrites it
      if (above < rem && rem <= above + static_cast<int64_t>(own)) {
        int64_t left = rem - above;
        int digit = 8 * lane + 7;
        for (; digit > 8 * lane; --digit) {
          if (static_cast<int64_t>(s.hist[digit]) >= left) break;
          left -= s.hist[digit];
        }
        s.prefix = prefix | (static_cast<uint64_t>(digit) << shift);
        s.remaining = left;
        // Every key of this bin is taken: its prefix (lower bytes 0) is the threshold.
        if (static_cast<int64_t>(s.hist[digit]) == left) s.done = 1;
      }
    }
    __syncthreads();
    if (s.done) break;
  }
  return s.prefix;
}

// Appends every key(i) >= threshold (i < n) to out, in no particular order, through the shared
// cursor *count (zeroed by the caller, then a __syncthreads). One shared atomic per warp and
// round: an atomic per key on the one cursor serialised the ~k winners (~10 us of a 2048-of-4096
// selection on the H200). blockDim.x must be a multiple of 32 (warp-uniform trip count).
template <typename KeyFn>
__device__ void block_gather_at_least(KeyFn key, int64_t n, uint64_t threshold, uint64_t* out, uint32_t* count) {
  const int lane = threadIdx.x & 31;
  for (int64_t base = threadIdx.x - lane; base < n; base += blockDim.x) {
    const int64_t i = base + lane;
    const uint64_t k = i < n ? key(i) : 0;
    const bool win = i < n && k >= threshold;
    const unsigned mask = __ballot_sync(0xffffffffu, win);
    if (mask == 0) continue;
    uint32_t at = 0;
    if (lane == 0) at = atomicAdd(count, static_cast<uint32_t>(__popc(mask)));
    at = __shfl_sync(0xffffffffu, at, 0);
    if (win) out[at + __popc(mask & ((1u << lane) - 1))] = k;
  }
}

// Sorts keys[0..k) descending in place (k <= capacity, a power of two >= k is used; the padding
// keys[k..n) is set to 0, below every real key).
__device__ inline void block_sort_desc(uint64_t* keys, int k) {
  int n = 1;
  while (n < k) n <<= 1;
  for (int i = k + threadIdx.x; i < n; i += blockDim.x) keys[i] = 0;
  __syncthreads();
  for (int size = 2; size <= n; size <<= 1) {
    for (int stride = size >> 1; stride > 0; stride >>= 1) {
      for (int i = threadIdx.x; i < n; i += blockDim.x) {
        const int j = i ^ stride;
        if (j > i) {
          const bool desc = (i & size) == 0;
          const uint64_t x = keys[i], y = keys[j];
          if (desc ? (x < y) : (x > y)) {
            keys[i] = y;
            keys[j] = x;
          }
        }
      }
      __syncthreads();
    }
  }
}

}  // namespace dsa::ops::cuda
