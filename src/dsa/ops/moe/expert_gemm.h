// Grouped expert GEMM over the contiguous per-expert layout (layout.h):
//   out[r][n] = sum_k a[src(r)][k] * W[m_indices[r]][n][k]     for rows with m_indices[r] >= 0,
// where src(r) = a_rows[r] when a_rows is given (gather fused into the GEMM) else r.
// Rows whose expert is -1 (padding) are not written. With m_indices undefined the GEMM is dense:
// every row uses expert 0 (shared experts, dense FP8 linear layers).
//
// Weight formats (checkpoint layouts, no reshuffle at load):
//   MXFP4:    weight [E][N][K/2] bytes (I8/U8/FP4X2), two e2m1 per byte, low nibble = even k;
//             scale [E][N][K/32] UE8M0 bytes (E8M0/U8).
//   FP8Block: weight [E][N][K] e4m3; scale [E][ceil(N/128)][K/128] f32 or UE8M0 (E8M0/U8).
//   BF16:     weight [E][N][K] bf16 (unquantized checkpoints, e.g. GLM-5 bf16); no scale (the
//             scale tensor must be undefined).
// Activations a: [rows_a][K] bf16; out: [rows][N] bf16 (dense mode: bf16 or f32), or [rows][N/2]
// with fuse_swiglu, where
// rows 0..N/2-1 of W are the gate projection and N/2..N-1 the up projection and the output is
// silu(min(gate, L)) * clamp(up, -L, L) (L = swiglu_limit; 0 = no clamp), computed from the fp32
// accumulators. Accumulation is fp32 over exactly dequantized weights (bf16 x bf16 products; BF16
// weights are used as they are).
// K must be a multiple of 128 and N a multiple of 8 (16 with fuse_swiglu).
//
// Split-K (CUDA, dense mode only): when the output tiles of a call are too few for the device's
// SMs (narrow FP8 linears at decode), K is cut into slices of whole 128-k chunks (so slices never
// cut a 128x128 scale block) over extra CTAs, which write fp32 partials to a per-(device, stream)
// workspace; the last CTA of each output tile adds the slices in slice order (deterministic: the
// same bits every run, whatever the timing) and writes out. The sums differ from the unsplit
// kernel only by fp32 summation order. See expert_gemm_split below for the rule.
#pragma once
#include <cstdint>

#include "dsa/core/tensor.h"

namespace dsa::ops {

enum class WeightFormat { MXFP4, FP8Block, BF16 };

const char* weight_format_name(WeightFormat f);  // "mxfp4", "fp8", "bf16"

struct ExpertWeights {
  WeightFormat format = WeightFormat::MXFP4;
  Tensor weight;
  Tensor scale;  // undefined for BF16
  int64_t experts() const { return weight.size(0); }
  int64_t n() const { return weight.size(1); }
  int64_t k() const { return format == WeightFormat::MXFP4 ? weight.size(2) * 2 : weight.size(2); }
  // Throws dsa::Error naming `what` and the bad field when shapes/dtypes do not match the format.
  void validate(const char* what) const;
  // Bytes of one expert's weights plus scales (what a GEMM streams per used expert).
  int64_t bytes_per_expert() const;
};

// Tactics of the CUDA kernels (the CPU reference ignores them; results do not depend on them
// beyond fp32 summation order):
//   0: tile kernel, 16-row tiles; 1: tile kernel, 64-row tiles (prefill); 2: tile kernel,
//   16-row tiles with two warps per weight row group splitting k;
//   3-8: decode stream kernel (weights as the MMA's 16-row operand, 8 token rows per CTA; MXFP4
//   and FP8; BF16 weights run tactic 2 for 4 and tactic 0 for the others), in forms that differ
//   in weight rows per warp, pipeline stages and k per stage (cuda/expert_gemm_stream_*.cu);
//   4 is the k-split form for T = 1. Dense FP8 calls of at most 32 rows run tactic 1 as 32 x 128
//   tiles (cuda/expert_gemm_fp8.cu).
//   9-10: register-streaming ("GEMV") kernel for 1-8 rows per expert (cuda/expert_gemm_gemv_*.cu):
//   weights go from global memory straight into the unpacking lane's registers (16-byte loads,
//   next chunk in flight, no shared memory or barrier in the k loop), one CTA per layout segment
//   (its 8-row tiles in turn) and 64 weight rows, the K chunks split over 2 warps (MXFP4; FP8:
//   none), partial sums added in a fixed order; 9 keeps one chunk's loads in flight while one is
//   unpacked, 10 two (more registers, 3 instead of 4 CTAs per SM). BF16 weights run tactic 0
//   for these ids.
constexpr int kExpertGemmTactics = 11;

// The automatic rule uses tactic 9 for grouped MXFP4 calls with at most this many expected rows
// per expert (V4-Flash T <= 8, V4-Pro T <= 12); 0 turns that off. Measured on the H200
// (docs/perf/moe-gemv-2026-12-02.md): V4-Flash T = 1 43.8 us against 73.7 us for the previous
// rule's tactic 5 (1.68x) and 65.2 us for the best stream tactic; V4-Pro T = 1 within 5 % of
// tactic 5 (tactic 10 3 % faster); FP8 (GLM-5.1) stays on the stream kernel, where tactic 6 was
// 5 % faster than the GEMV at T = 1.
constexpr double kExpertGemmGemvMaxRowsPerExpert = 0.2;

struct ExpertGemmParams {
  bool fuse_swiglu = false;
  float swiglu_limit = 0.f;  // 0: no clamp
  // -1 auto (resolve_expert_gemm_tactic), else one of the tactics above.
  int tactic = -1;
  // Row alignment of the expert segments in m_indices (layout.h alignment): 64-row tiles are only
  // used when it is a multiple of 64. Must be a multiple of 16 (ignored in dense mode).
  int64_t m_alignment = 64;
  // Expected valid rows per expert (tokens * topk / experts) to pick the tile when tactic is -1;
  // 0 = unknown (then rows / experts is used).
  double rows_per_expert_hint = 0;
  // Split-K slices of dense CUDA calls: -1 auto (expert_gemm_split), 1 never, n > 1 exactly
  // min(n, K/128) slices (rounded to equal whole-chunk slices). Grouped calls never split (n > 1
  // with m_indices is an error).
  int k_splits = -1;
};

// A split-K plan: `splits` slices of `chunks` 128-k chunks each (the last may be shorter; every
// slice is non-empty). splits = 1, chunks = K/128: no split.
struct ExpertGemmSplit {
  int splits = 1;
  int chunks = 0;
};

// The split of a dense call of `rows` rows with `tactic` (resolved) on a device of `sm_count`
// SMs; `requested` is ExpertGemmParams::k_splits. Automatic rule (FP8 weights only; MXFP4 and
// BF16 dense calls are not split unless requested):
//   ctas = output tiles of the tactic's CTA shape (row tiles x column tiles);
//   no split when ctas >= sm_count (one CTA per SM already: the grid streams at full width);
//   else splits = ceil(2 sm_count / ctas) (about two CTAs per SM, enough loads in flight to be
//   HBM-bound; one CTA per SM holds only 2-3 stages of 8-16 KB), capped by
//     K/256: slices of >= 2 chunks (prologue and partial-write cost per CTA stay small),
//     16: the reducing CTA reads `splits` partials per output (a short tail),
//     K/(16 rows): partial traffic (8 bytes per output and split: one fp32 write + read)
//                  at most half the weight bytes;
//   and no split when that leaves < 2. The chunks per slice are rounded up to the stage's chunk
//   count (KCH = 2 stream forms) when K allows; splits = ceil(chunks of K / chunks).
// Examples (H200, 132 SMs; T=1 tactic 3): N=2048 K=6144 -> 8 x 6 chunks (256 CTAs); N=576 ->
// 16 x 3 (144); N=6144 K=12288 -> 3 x 32 (288); N=24576 -> none (384 CTAs).
ExpertGemmSplit expert_gemm_split(WeightFormat f, int tactic, int64_t rows, int64_t N, int64_t K, bool swiglu,
                                  int sm_count, int requested = -1);

// The split a call makes: expert_gemm_split with the call's resolved tactic and the SM count of
// `dev`; {1, K/128} on the CPU and for grouped calls.
ExpertGemmSplit expert_gemm_planned_split(const ExpertWeights& w, int64_t rows, bool grouped, const ExpertGemmParams& p,
                                          Device dev);

// The tactic a CUDA call runs: p.tactic when given (64-row tiles fall back to tactic 0 on
// segments not aligned to 64), else the automatic rule by expected rows per expert
// (p.rows_per_expert_hint, else rows / experts when grouped, rows when dense); the rule is
// the H200 measurements of docs/perf/moe-decode-2026-12-01.md and, for the GEMV tactic 9 at
// <= kExpertGemmGemvMaxRowsPerExpert rows per expert (grouped MXFP4 calls only),
// docs/perf/moe-gemv-2026-12-02.md.
// The environment variable DSA_MOE_GEMV=0 turns that part of the rule off at run time (read
// once); tuned tactics (ops/tactics) are not affected. Dense FP8 calls of at most 8 rows (decode
// linears) take tactic 4, or 6 for rows of K >= 16384 (K >= 8192 at one row): K = 0 (unknown)
// counts as short rows.
int resolve_expert_gemm_tactic(WeightFormat f, const ExpertGemmParams& p, int64_t rows, int64_t experts, bool grouped,
                               int64_t K = 0);

void validate_expert_gemm(const Tensor& a, const Tensor& a_rows, const Tensor& m_indices, const ExpertWeights& w,
                          const Tensor& out, const ExpertGemmParams& p);

void expert_gemm(const Tensor& a, const Tensor& a_rows, const Tensor& m_indices, const ExpertWeights& w,
                 Tensor& out, const ExpertGemmParams& p = {});

// Dequantizes expert e to fp32 [N][K] (host tensors; used by references and baselines).
Tensor dequantize_expert_f32(const ExpertWeights& w, int64_t e);

}  // namespace dsa::ops
