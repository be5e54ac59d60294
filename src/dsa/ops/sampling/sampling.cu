// The sampler on the GPU (sampling.h), two launches:
//   sample_partial_kernel: grid (C, N), 256 threads. CTA (c, n) scans ids [c*chunk, (c+1)*chunk)
//      of row n (16-byte loads when the rows are 16-byte aligned, four in flight per thread) for
//      the validity check (NaN or +inf), the max / argmax (lowest id on ties) and -- for rows
//      that sample from the whole vocabulary (temperature > 0, no top_k / top_p / min_p) -- the
//      Gumbel-max candidate, and writes one Partial. chunk = 2048 ids (V4's 129280: 64 CTAs a
//      row instead of one CTA walking 126 dependent strided loads per thread).
//   sample_finish_kernel: grid N, 1024 threads. Reduces the C partials of its row (the order of
//      "better" is total -- key desc, id asc -- so any reduction tree gives the same winner as the
//      old single-CTA scan, bit for bit). Invalid -> -1, greedy -> argmax, min_p -> -2, whole-
//      vocabulary sampling -> the Gumbel winner. Rows with top_k / top_p continue on this CTA
//      exactly as the former single-CTA kernel did after its max pass:
//   2. top_k (0 < k < V): the k-th largest (logit, id) key by block radix select
//      (ops/common/block_select.cuh); candidates are the keys >= it.
//   3. top_p < 1: the candidates (or, beyond 2048 of them, the 2048 largest) are gathered into
//      shared memory and sorted; thread 0 walks the sorted prefix until the softmax mass,
//      normalised over all candidates (a fixed-order block sum), reaches top_p; if 2048 are not
//      enough the row gives -2 (the caller samples it on the host).
//   4. Gumbel-max over the kept candidates: each thread scores its ids, a block reduction keeps
//      the largest key (lowest id on ties).
// Every reduction has a fixed shape, so a row gives the same token on every run, and the same
// token as the former single-kernel sampler (the same float expressions per id). The partials
// live in a caller-provided scratch buffer (sample_scratch_bytes); no host synchronisation.
#include "dsa/core/pdl.cuh"
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

struct Partial {
  float mkey, gkey;
  int32_t mid, gid;  // -1: none
  int32_t bad;
};

constexpr int kPartThreads = 256;

// Rows that draw from the whole vocabulary: the Gumbel-max needs no threshold, so the partial
// kernel scores every id.
__device__ __forceinline__ bool draws_all(const SamplingRow& r, int64_t V) {
  return r.temperature != 0.f && r.min_p <= 0.f && !(r.top_k > 0 && r.top_k < V) && r.top_p >= 1.f;
}

__global__ void __launch_bounds__(kPartThreads) sample_partial_kernel(const float* logits, const uint8_t* rows,
                                                                      Partial* part, int64_t V, int64_t chunk,
                                                                      bool vec) {
  pdl::entry();
  __shared__ float skey[32];
  __shared__ int64_t sid[32];
  __shared__ int bad_s;
  const int64_t n = blockIdx.y, c = blockIdx.x;
  const float* l = logits + n * V;
  SamplingRow r;
  memcpy(&r, rows + n * sizeof(SamplingRow), sizeof r);
  const bool all = draws_all(r, V);
  const float T = r.temperature;
  const int64_t lo = c * chunk, hi = lo + chunk < V ? lo + chunk : V;
  if (threadIdx.x == 0) bad_s = 0;
  __syncthreads();
  Best mx{-INFINITY, -1}, g{-INFINITY, -1};
  bool bad = false;
  auto visit = [&](float v, int64_t i) {
    if (isnan(v) || v == INFINITY) bad = true;
    if (v > -INFINITY) {
      mx = better(mx, Best{v, i});
      if (all) g = better(g, Best{v / T + gumbel(r.seed, r.counter, i), i});
    }
  };
  constexpr int kUnroll = 4;
  for (int64_t i0 = lo + 4 * static_cast<int64_t>(threadIdx.x); i0 < hi; i0 += 4 * kUnroll * kPartThreads) {
    float v[kUnroll][4];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {  // all loads first: one memory round trip per kUnroll groups
      const int64_t i = i0 + 4 * static_cast<int64_t>(u) * kPartThreads;
      if (vec && i < hi) {
        const float4 f = *reinterpret_cast<const float4*>(l + i);
        v[u][0] = f.x, v[u][1] = f.y, v[u][2] = f.z, v[u][3] = f.w;
      } else {
#pragma unroll
        for (int e = 0; e < 4; ++e) v[u][e] = i + e < hi ? l[i + e] : -INFINITY;
      }
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t i = i0 + 4 * static_cast<int64_t>(u) * kPartThreads;
#pragma unroll
      for (int e = 0; e < 4; ++e)
        if (i + e < hi) visit(v[u][e], i + e);
    }
  }
  if (bad) atomicOr(&bad_s, 1);  // an integer flag: order-free
  mx = block_best(mx, skey, sid);
  g = block_best(g, skey, sid);  // block_best's barriers also publish bad_s
  if (threadIdx.x == 0)
    part[n * gridDim.x + c] = Partial{mx.key, g.key, static_cast<int32_t>(mx.id), static_cast<int32_t>(g.id), bad_s};
}

__global__ void __launch_bounds__(kThreads) sample_finish_kernel(const float* logits, const uint8_t* rows,
                                                                 const Partial* part, int nparts, int32_t* out,
                                                                 int64_t V) {
  pdl::entry();
  __shared__ RadixScratch radix;
  __shared__ uint64_t sorted[kSampleMaxSorted];
  __shared__ float skey[32];
  __shared__ int64_t sid[32];
  __shared__ int bad_s;
  __shared__ uint32_t count_s;
  __shared__ int64_t keep_s;
  const int64_t n = blockIdx.x;
  const float* l = logits + n * V;
  SamplingRow r;
  memcpy(&r, rows + n * sizeof(SamplingRow), sizeof r);

  // 1. max, argmax, validity (and the whole-vocabulary Gumbel winner) from the partials
  if (threadIdx.x == 0) bad_s = 0;
  __syncthreads();
  Best mx{-INFINITY, -1}, g{-INFINITY, -1};
  bool bad = false;
  for (int j = threadIdx.x; j < nparts; j += blockDim.x) {
    const Partial p = part[n * nparts + j];
    bad |= p.bad != 0;
    mx = better(mx, Best{p.mkey, p.mid});
    g = better(g, Best{p.gkey, p.gid});
  }
  if (bad) atomicOr(&bad_s, 1);
  mx = block_best(mx, skey, sid);
  g = block_best(g, skey, sid);
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
  if (draws_all(r, V)) {
    if (threadIdx.x == 0) out[n] = static_cast<int32_t>(g.id);
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
    float part_sum = 0.f;
    for (int64_t i = threadIdx.x; i < V; i += blockDim.x)
      if (K == V || key_of(i) >= kth) part_sum += expf((l[i] - mx.key) / T);
    const float z = block_sum(part_sum, skey);
    const int64_t S = K < kSampleMaxSorted ? K : kSampleMaxSorted;
    const uint64_t skth = S < V ? block_kth_largest(key_of, V, S, radix) : 0;
    if (threadIdx.x == 0) count_s = 0;
    __syncthreads();
    block_gather_at_least(key_of, V, skth, sorted, &count_s);  // exactly S keys
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
  for (int64_t i = threadIdx.x; i < V; i += blockDim.x) {
    if (key_of(i) < keep_key) continue;
    if (l[i] == -INFINITY) continue;
    pick = better(pick, Best{l[i] / T + gumbel(r.seed, r.counter, i), i});
  }
  pick = block_best(pick, skey, sid);
  if (threadIdx.x == 0) out[n] = static_cast<int32_t>(pick.id);
}

int64_t chunk_of(int64_t V) {
  constexpr int64_t kChunk = 2048, kMaxParts = 1024;
  const int64_t c = (V + kMaxParts - 1) / kMaxParts;
  return c <= kChunk ? kChunk : (c + 3) / 4 * 4;
}

}  // namespace

size_t sample_scratch_bytes(int64_t N, int64_t V) {
  return static_cast<size_t>(N) * static_cast<size_t>((V + chunk_of(V) - 1) / chunk_of(V)) * sizeof(Partial);
}

void sample_tokens(const float* logits, const uint8_t* rows, int32_t* out, int64_t N, int64_t V, void* scratch) {
  if (N == 0) return;
  if (N > 65535) cuda_launch::launch_error("sample_tokens: too many rows for one grid");
  const int64_t chunk = chunk_of(V);
  const int nparts = static_cast<int>((V + chunk - 1) / chunk);
  const bool vec = V % 4 == 0 && reinterpret_cast<uintptr_t>(logits) % 16 == 0;
  Partial* part = static_cast<Partial*>(scratch);
  pdl::launch(sample_partial_kernel, dim3(nparts, static_cast<unsigned>(N)), kPartThreads, 0, DSA_CURRENT_STREAM,
              logits, rows, part, V, chunk, vec);
  cuda_launch::check_launch("sample_partial_kernel");
  pdl::launch(sample_finish_kernel, static_cast<unsigned>(N), kThreads, 0, DSA_CURRENT_STREAM, logits, rows, part,
              nparts, out, V);
  cuda_launch::check_launch("sample_finish_kernel");
}

}  // namespace dsa::ops::cuda
