// The sampler on the GPU (sampling.h): one CTA of 1024 threads per row.
//   1. max / argmax (lowest id on ties) and a validity check (NaN or +inf -> -1) over the row;
//      greedy rows end here.
//   2. top_k (0 < k < V): the k-th largest (logit, id) key by block radix select
//      (ops/common/block_select.cuh); candidates are the keys >= it.
//   3. top_p < 1: the candidates (or, beyond 2048 of them, the 2048 largest) are gathered into
//      shared memory and sorted; thread 0 walks the sorted prefix until the softmax mass,
//      normalised over all candidates (a fixed-order block sum), reaches top_p; if 2048 are not
//      enough the row gives -2 (the caller samples it on the host).
//   4. Gumbel-max over the kept candidates: each thread scores its ids, a block reduction keeps
//      the largest key (lowest id on ties).
// Every reduction has a fixed shape, so a row gives the same token on every run.
#include <cfloat>
#include <cstdint>
#include <cstring>

#include "dsa/core/cuda_stream.h"
#include "dsa/ops/common/block_select.cuh"
#include "dsa/ops/norm/cuda_elem.cuh"
#include "dsa/core/cuda_launch.h"
#include "dsa/ops/sampling/philox.h"
#include "dsa/ops/sampling/sampling_row.h"
#include "dsa/ops/sampling/sampling_cuda.h"

namespace dsa::ops::cuda {
namespace {

constexpr int kThreads = 1024;

struct Best {
  float key;
  int64_t id;
};
__device__ __forceinline__ Best better(Best a, Best b) {
  if (b.id < 0) return a;
  if (a.id < 0) return b;
  return (b.key > a.key || (b.key == a.key && b.id < a.id)) ? b : a;
}

// Block-wide best (key desc, id asc); every thread gets the result.
__device__ Best block_best(Best v, float* skey, int64_t* sid) {
  for (int o = 16; o > 0; o >>= 1) {
    Best w{__shfl_xor_sync(0xffffffffu, v.key, o), __shfl_xor_sync(0xffffffffu, v.id, o)};
    v = better(v, w);
  }
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) {
    skey[warp] = v.key;
    sid[warp] = v.id;
  }
  __syncthreads();
  Best r{-INFINITY, -1};
  if (lane < blockDim.x / 32) r = Best{skey[lane], sid[lane]};
  for (int o = 16; o > 0; o >>= 1) {
    Best w{__shfl_xor_sync(0xffffffffu, r.key, o), __shfl_xor_sync(0xffffffffu, r.id, o)};
    r = better(r, w);
  }
  __syncthreads();
  return r;
}

__device__ __forceinline__ float gumbel(uint64_t seed, uint64_t counter, int64_t id) {
  const float u = ops::philox_uniform(seed, counter, static_cast<uint64_t>(id));
  return -logf(-logf(u));
}

__global__ void __launch_bounds__(kThreads) sample_kernel(const float* logits, const uint8_t* rows, int32_t* out,
                                                          int64_t V) {
  __shared__ RadixScratch radix;
  __shared__ uint64_t sorted[kSampleMaxSorted];
  __shared__ float skey[32];
  __shared__ int64_t sid[32];
  __shared__ int bad_s;
  __shared__ int count_s;
  __shared__ int64_t keep_s;
  const int64_t n = blockIdx.x;
  const float* l = logits + n * V;
  SamplingRow r;
  memcpy(&r, rows + n * sizeof(SamplingRow), sizeof r);

  // 1. max, argmax, validity
  if (threadIdx.x == 0) bad_s = 0;
  __syncthreads();
  Best mx{-INFINITY, -1};
  bool bad = false;
  for (int64_t i = threadIdx.x; i < V; i += blockDim.x) {
    const float v = l[i];
    if (isnan(v) || v == INFINITY) bad = true;
    if (v > -INFINITY) mx = better(mx, Best{v, i});
  }
  if (bad) atomicOr(&bad_s, 1);
  mx = block_best(mx, skey, sid);
  if (bad_s || mx.id < 0) {
    if (threadIdx.x == 0) out[n] = -1;
    return;
  }
  if (r.temperature == 0.f) {
    if (threadIdx.x == 0) out[n] = static_cast<int32_t>(mx.id);
    return;
  }
  if (r.min_p > 0.f) {  // not done here: the caller samples the row on the host
    if (threadIdx.x == 0) out[n] = -2;
    return;
  }
  const float T = r.temperature;
  const int64_t K = (r.top_k > 0 && r.top_k < V) ? r.top_k : V;
  auto key_of = [&](int64_t i) { return value_index_key(l[i], i); };

  // 2. top_k threshold (keys >= kth are the candidates)
  uint64_t kth = 0;
  if (K < V) kth = block_kth_largest(key_of, V, K, radix);

  // 3. top_p: how many of the sorted candidates are kept (keep_s), as a key threshold
  uint64_t keep_key = kth;  // candidates with key >= keep_key are kept
  if (r.top_p < 1.f) {
    float part = 0.f;
    for (int64_t i = threadIdx.x; i < V; i += blockDim.x)
      if (K == V || key_of(i) >= kth) part += expf((l[i] - mx.key) / T);
    const float z = block_sum(part, skey);
    const int64_t S = K < kSampleMaxSorted ? K : kSampleMaxSorted;
    const uint64_t skth = S < V ? block_kth_largest(key_of, V, S, radix) : 0;
    if (threadIdx.x == 0) count_s = 0;
    __syncthreads();
    for (int64_t i = threadIdx.x; i < V; i += blockDim.x) {
      const uint64_t k = key_of(i);
      if (k >= skth) sorted[atomicAdd(&count_s, 1)] = k;  // exactly S keys
    }
    __syncthreads();
    block_sort_desc(sorted, static_cast<int>(S));
    if (threadIdx.x == 0) {
      float cum = 0.f;
      int64_t keep = -1;
      for (int64_t j = 0; j < S; ++j) {
        cum += expf((l[key_index(sorted[j])] - mx.key) / T);
        if (cum / z >= r.top_p) {
          keep = j + 1;
          break;
        }
      }
      if (keep < 0 && S == K) keep = K;  // float rounding left the total just below top_p
      keep_s = keep;
    }
    __syncthreads();
    if (keep_s < 0) {
      if (threadIdx.x == 0) out[n] = -2;  // the nucleus is wider than the 2048 sorted candidates
      return;
    }
    keep_key = sorted[keep_s - 1];
  }

  // 4. Gumbel-max over the kept candidates
  Best pick{-INFINITY, -1};
  const bool all = K == V && r.top_p >= 1.f;
  for (int64_t i = threadIdx.x; i < V; i += blockDim.x) {
    if (!all && key_of(i) < keep_key) continue;
    if (l[i] == -INFINITY) continue;
    pick = better(pick, Best{l[i] / T + gumbel(r.seed, r.counter, i), i});
  }
  pick = block_best(pick, skey, sid);
  if (threadIdx.x == 0) out[n] = static_cast<int32_t>(pick.id);
}

}  // namespace

void sample_tokens(const float* logits, const uint8_t* rows, int32_t* out, int64_t N, int64_t V) {
  if (N == 0) return;
  if (N > 0x7fffffffLL) cuda_launch::launch_error("sample_tokens: too many rows for one grid");
  sample_kernel<<<static_cast<unsigned>(N), kThreads, 0, DSA_CURRENT_STREAM>>>(logits, rows, out, V);
  cuda_launch::check_launch("sample_kernel");
}

}  // namespace dsa::ops::cuda
