// Fused routing + contiguous MoE layout for decode sizes: one launch instead of route_kernel, two
// memsets, layout_count_kernel and layout_assign_kernel.
#include "dsa/core/pdl.cuh"
#include <cstdint>

#include "dsa/ops/moe/cuda/block_scan.cuh"
#include "dsa/ops/moe/cuda/kernels.h"
#include "dsa/ops/moe/cuda/route_warp.cuh"
#include "dsa/core/cuda_stream.h"

namespace dsa::ops::cuda {
namespace {

// One CTA, blockDim = 32 * max(min(T, 32), ceil(E / 32)) (so every expert has a thread and every
// token up to 32 a warp). T <= kFusedMaxTokens, E <= 512, all state in shared memory:
//  1. warp w routes tokens w, w + nwarps, .. (route_warp.cuh: the same choice and weights as
//     route_kernel and the CPU reference); ids also kept in shared memory, as local ids of the
//     layout's experts [base, base + EL) (expert parallelism; all experts: base 0, EL = E), -1
//     for the others (dropped: dst_row -1), while ids / wts get the global choice;
//  2. per token an EL-bit mask of its (local) experts;
//  3. thread e walks the tokens in order and numbers its (token, slot) pairs: rank = how many
//     earlier pairs chose e -- exactly the CPU reference's (token, slot) order, so the layout is
//     deterministic and identical to the CPU's (the atomics of layout_assign_kernel are not);
//  4. block scan of the aligned counts (offsets) and of the raw counts (start of e's pairs in a
//     compacted pair list); each expert marks its row blocks in a block -> expert table;
//  5. per pair: dst_row = offset + rank, pair list entry; per row (coalesced, every row of
//     rows_cap written once): expert and token, or -1 for padding and the unused tail.
// Shared memory (ints): 3n + T*W + 3E + 2 + nseg + 64 with n = T*k, W = ceil(E/32),
// nseg = rows bound / align; <= ~24 KB for T=32, k=32, E=512, align=16 (below 48 KB: SM120 too).
template <int J>
__global__ void __launch_bounds__(1024) route_layout_kernel(RouteLayoutArgs a) {
  pdl::entry();
  extern __shared__ int sm[];
  // E: the routed experts (logits width); EL: the layout's (local ids id - base, others dropped).
  const int T = a.T, E = a.E, EL = a.EL, k = a.k, n = T * k, W = (EL + 31) / 32;
  int* sid = sm;               // [n] local expert of (token, slot), -1 when not the layout's
  int* srank = sid + n;        // [n] rank of the pair among its expert's pairs
  int* spair = srank + n;      // [n] pairs compacted by expert
  int* mask = spair + n;       // [T][W] expert bits per token
  int* cnt = mask + T * W;     // [E]
  int* offs = cnt + E;         // [E + 1] aligned row offsets
  int* cst = offs + E + 1;     // [E + 1] start of each expert's pairs in spair
  int* scratch = cst + E + 1;  // [64]
  int* seg = scratch + 64;     // [nseg] expert of each align-row block
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, nwarps = blockDim.x >> 5;

  for (int t = warp; t < T; t += nwarps) {
    const int32_t* hrow = nullptr;
    if (a.tid2eid) {
      const int32_t tok = a.token_ids[t];
      if (tok >= 0 && tok < a.vocab) hrow = a.tid2eid + static_cast<int64_t>(tok) * k;
    }
    int id;
    float w;
    rw::route_token<J>(a.logits + static_cast<int64_t>(t) * E, a.bias, E, k, a.score, a.scaling, a.tid2eid != nullptr,
                       hrow, lane, id, w);
    if (lane < k) {
      const int loc = id - a.base;
      sid[t * k + lane] = loc >= 0 && loc < EL ? loc : -1;
      a.ids[t * k + lane] = id;
      a.wts[t * k + lane] = w;
    }
  }
  __syncthreads();

  for (int i = tid; i < T * W; i += blockDim.x) {
    const int t = i / W, word = i % W;
    uint32_t bits = 0;
    for (int s = 0; s < k; ++s) {
      const int e = sid[t * k + s];
      if (e >= 0 && (e >> 5) == word) bits |= 1u << (e & 31);
    }
    mask[i] = static_cast<int>(bits);
  }
  __syncthreads();

  const int e = tid;  // blockDim >= E >= EL
  int c = 0;
  if (e < EL) {
    for (int t = 0; t < T; ++t) {
      if (!((static_cast<uint32_t>(mask[t * W + (e >> 5)]) >> (e & 31)) & 1u)) continue;
      for (int s = 0; s < k; ++s)  // a hash table may name an expert twice in one row
        if (sid[t * k + s] == e) srank[t * k + s] = c++;
    }
  }
  const int al = (c + a.align - 1) / a.align * a.align;
  int ea, ec, ta, tc;
  block_exclusive_scan2(al, c, scratch, ea, ec, ta, tc);
  if (e < EL) {
    cnt[e] = c;
    offs[e] = ea;
    cst[e] = ec;
    a.counts[e] = c;
    a.offsets[e] = ea;
    for (int b = ea / a.align; b < (ea + al) / a.align; ++b) seg[b] = e;
  }
  if (tid == 0) {
    offs[EL] = ta;
    cst[EL] = tc;
    a.offsets[EL] = ta;
  }
  __syncthreads();

  for (int i = tid; i < n; i += blockDim.x) {
    const int ei = sid[i];
    if (ei < 0) {
      a.dst_row[i] = -1;
      continue;
    }
    a.dst_row[i] = offs[ei] + srank[i];
    spair[cst[ei] + srank[i]] = i;
  }
  __syncthreads();

  const int total = offs[EL];
  for (int64_t r = tid; r < a.rows_cap; r += blockDim.x) {
    int m = -1, st = -1;
    if (r < total) {
      const int er = seg[r / a.align];
      const int loc = static_cast<int>(r) - offs[er];
      if (loc < cnt[er]) {
        m = er;
        st = spair[cst[er] + loc] / k;
      }
    }
    a.m_indices[r] = m;
    a.src_token[r] = st;
  }
}

}  // namespace

bool launch_route_layout(const RouteLayoutArgs& a) {
  if (a.T < 1 || a.T > kFusedMaxTokens || a.E < 1 || a.E > 512 || a.k < 1 || a.k > 32 || a.align < 1) return false;
  if (a.EL < 1 || a.base < 0 || a.base + a.EL > a.E) return false;
  const int64_t n = static_cast<int64_t>(a.T) * a.k, W = (a.E + 31) / 32;
  const int64_t ints = 3 * n + a.T * W + 3 * static_cast<int64_t>(a.E) + 2 + 64 + a.nseg;
  const size_t smem = static_cast<size_t>(ints) * sizeof(int);
  if (smem > 48 * 1024) return false;
  const int warps_t = a.T < 32 ? a.T : 32;
  const int warps_e = (a.E + 31) / 32;
  const int threads = 32 * (warps_t > warps_e ? warps_t : warps_e);
  auto* st = DSA_CURRENT_STREAM;
  if (a.E <= 128)
    pdl::launch(route_layout_kernel<4>, 1, threads, smem, st, a);
  else if (a.E <= 256)
    pdl::launch(route_layout_kernel<8>, 1, threads, smem, st, a);
  else
    pdl::launch(route_layout_kernel<16>, 1, threads, smem, st, a);
  return true;
}

}  // namespace dsa::ops::cuda
