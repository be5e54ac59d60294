// Raw launchers of the MoE kernels (defined in the .cu files of this folder). Pointers and sizes
// only: the .cu files must not see Tensor/fmt (nvcc cannot compile fmt's consteval checks), so
// the Tensor-level CUDA paths live in cuda_ops.cpp and check errors after each launch.
// All launches go to the default stream.
#pragma once
#include <cstdint>

#include "dsa/ops/moe/router_types.h"

namespace dsa::ops::cuda {

void launch_route(const float* logits, const float* bias, const int32_t* token_ids, const int32_t* tid2eid,
                  int64_t vocab, int32_t* ids, float* wts, int T, int E, int k, ScoreFunc f, float scaling);
void launch_router_logits(const void* x, const void* gate, bool gate_f32, float* logits, int T, int E, int H);
// Counting + aligned offsets, then one row per (token, slot). m_indices/src_token must be -1 already.
// ids are global; experts [base, base + E) are the layout's (local id = id - base).
void launch_layout(const int32_t* ids, int64_t n, int k, int base, int E, int align, int32_t* counts, int32_t* offsets,
                   int32_t* cursor, int32_t* dst_row, int32_t* m_indices, int32_t* src_token);

// Fused routing + layout (route_layout.cu) for decode sizes: the outputs of launch_route followed
// by launch_layout (plus the -1 fill of m_indices/src_token), with the CPU reference's row order.
// Returns false, launching nothing, outside T <= kFusedMaxTokens, E <= 512, k <= 32.
constexpr int kFusedMaxTokens = 32;
struct RouteLayoutArgs {
  const float* logits;       // [T][E]
  const float* bias;         // [E] or null
  const int32_t* token_ids;  // [T], with tid2eid (hash routing) only
  const int32_t* tid2eid;    // [vocab][k] or null (score routing)
  int64_t vocab;
  int32_t* ids;              // [T][k]
  float* wts;                // [T][k]
  int T, E, k;
  // The layout's experts: global ids [base, base + EL) (expert parallelism; all: base 0, EL = E).
  // ids / wts stay global; counts, offsets and m_indices are over the EL local experts.
  int base, EL;
  ScoreFunc score;
  float scaling;
  int align;
  int64_t rows_cap;
  int64_t nseg;              // moe_rows_upper_bound(T, k, EL, align) / align
  int32_t* counts;           // [EL]
  int32_t* offsets;          // [EL + 1]
  int32_t* dst_row;          // [T][k]
  int32_t* m_indices;        // [rows_cap]
  int32_t* src_token;        // [rows_cap]
};
bool launch_route_layout(const RouteLayoutArgs& a);
void launch_permute(const void* x, const int32_t* src_token, int64_t T, int64_t H, int64_t rows_cap, void* x_perm);
void launch_combine(const void* y, const int32_t* dst_row, const float* w, const void* shared, void* out, int64_t T,
                    int k, int64_t H, int64_t rows_cap);
void launch_swiglu(const void* gu, void* out, int64_t rows, int64_t I, float limit);
void launch_random_fill(void* p, int64_t n, int kind, uint64_t seed, float lo, float hi, int flag);

}  // namespace dsa::ops::cuda
