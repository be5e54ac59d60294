// Contiguous per-expert layout for grouped GEMMs (docs/model-reference.md §6, DeepGEMM's "m_grouped
// contiguous" form): the T*k (token, slot) pairs are sorted by expert into rows; expert e owns
// rows [offsets[e], offsets[e] + counts[e]) and its segment is padded to a multiple of the
// M alignment. Padding rows carry expert -1 in m_indices and token -1 in src_token.
//
// The row count is only known after routing (on the device). Buffers are therefore sized with
// the host-side upper bound  round_up(M*k + min(M*k, E)*(a-1), a)  and kernels skip row tiles
// whose m_indices are -1 (e.g. M=1, k=6, E=256, a=64: 384 rows instead of 32640).
//
// Row order inside an expert: the CPU reference orders by (token, slot), and so does the fused
// CUDA route + layout of decode sizes (route_and_layout, T <= 32); build_moe_layout on CUDA uses
// atomics, so there the order inside a segment may differ between runs. Nothing downstream
// depends on it: every row is computed independently and dst_row maps each (token, slot) to its row.
#pragma once
#include <cstdint>

#include "dsa/core/tensor.h"

namespace dsa::ops {

int64_t moe_rows_upper_bound(int64_t tokens, int64_t topk, int64_t experts, int64_t alignment);

struct MoeLayout {
  int64_t tokens = 0, topk = 0, experts = 0, alignment = 64, rows_cap = 0;
  // Expert parallelism: the layout's experts are global ids [expert_base, expert_base + experts)
  // (m_indices holds local ids, id - expert_base); the other ids are dropped like ids outside
  // [0, E) (dst_row -1: the slot adds nothing here, another rank's layout holds it).
  int64_t expert_base = 0;
  Tensor expert_offsets;  // [E+1] i32: first row of each expert; [E] = rows used (aligned)
  Tensor expert_counts;   // [E] i32: valid rows of each expert
  Tensor m_indices;       // [rows_cap] i32: expert of each row, -1 for padding
  Tensor src_token;       // [rows_cap] i32: token of each row, -1 for padding
  Tensor dst_row;         // [T][k] i32: row of (token, slot); -1 when the slot's expert is -1
  Tensor cursor;          // [E] i32 scratch of the CUDA build
};

// Allocates a layout for `tokens` x `topk` on `dev` (alignment must be a positive multiple of 16).
MoeLayout make_moe_layout(int64_t tokens, int64_t topk, int64_t experts, int64_t alignment, Device dev);

// Checks topk_ids [T][k] i32 contiguous against an allocated layout on its device; throws dsa::Error.
void validate_moe_layout(const Tensor& topk_ids, const MoeLayout& layout);

// Fills `layout` from topk_ids [T][k] i32 (same device). Expert ids outside
// [expert_base, expert_base + E) are dropped.
void build_moe_layout(const Tensor& topk_ids, MoeLayout& layout);

// x_perm[r] = x[src_token[r]] for valid rows, zeros for padding rows. x [T][H] bf16,
// x_perm [rows_cap][H] bf16. (The MoE layer gathers inside the GEMM instead; this op exists for
// callers that need the permuted activations themselves.)
void moe_permute(const Tensor& x, const MoeLayout& layout, Tensor& x_perm);

// Inverse: out[t] = shared[t] + sum_s w[t][s] * y[dst_row[t][s]] in fp32, stored bf16.
// y [rows_cap][H] bf16 (only valid rows are read), topk_weights [T][k] f32, shared [T][H] bf16
// or undefined, out [T][H] bf16.
void moe_combine(const Tensor& y, const MoeLayout& layout, const Tensor& topk_weights, const Tensor& shared,
                 Tensor& out);

}  // namespace dsa::ops
