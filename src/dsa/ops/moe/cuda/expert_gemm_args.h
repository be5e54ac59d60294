// Arguments of the grouped expert GEMM kernel (plain data, shared by the .cu and the host side).
#pragma once
#include <cstdint>

namespace dsa::ops::cuda::egemm {

struct Args {
  const void* a;             // bf16 [a_nrows][K]
  int64_t a_nrows;           // rows of a (bounds for gathered rows)
  const int32_t* a_rows;     // optional gather index [rows]
  const int32_t* m_indices;  // optional expert of each row [rows]; null = dense, expert 0
  int64_t rows;
  const uint8_t* w;  // weight bytes: packed e2m1, e4m3 or bf16 [E][N][K]
  const void* scale;  // MXFP4: u8 [E][N][K/32]; FP8: f32 or UE8M0 [E][ceil(N/128)][K/128]; BF16: unused
  int scale_ue8m0;    // FP8: 1 when scale holds UE8M0 bytes (read directly), 0 for fp32
  int E, N, K;
  void* out;  // bf16 (or fp32 with out_f32) [rows][ldo]
  int ldo;
  int swiglu;
  float limit;
  int out_f32;  // 1: out is fp32 (dense calls only), 0: bf16
  // Grouped calls: the row alignment of the expert segments (ExpertGemmParams::m_alignment; 0 in
  // dense calls). The GEMV kernel gives each CTA one segment (at most 256 rows) and sets
  // seg_rows itself; the other kernels ignore both.
  int m_align;
  int seg_rows;
  // Split-K (dense calls only, expert_gemm_split.h): blockIdx.z = split s takes the 128-k chunks
  // [s * split_chunks, min(K/128, (s + 1) * split_chunks)). With splits = 1, split_chunks must be
  // K/128 and ws / counters are unused. With splits > 1 every CTA writes its fp32 partial sums to
  // ws[s][row][weight row] and the last CTA of an output tile (counted in counters[tile], which
  // must be 0 at launch and is 0 again after it) adds the slices in order s = 0, 1, ... and
  // writes out: the result does not depend on which CTA finishes when.
  int splits;
  int split_chunks;
  float* ws;          // [splits][rows][N] fp32
  int* counters;      // [num_counters], one per output tile (gridDim.x * gridDim.y)
  int num_counters;
  // Dense calls: 1 = the decode kernels (stream, GEMV) prefetch the CTA's weight slice into L2
  // before pdl::entry() (expert_gemm_kernel.cuh, prefetch_dense_weights); 0 = they do not.
  int prefetch_w;
};

// Tactics (expert_gemm.h): 0-2 the tile kernel (expert_gemm_kernel.cuh): 0 = 16-row tiles,
// 1 = 64-row tiles (dense FP8 with <= 32 rows: 32 x 128 tiles), 2 = 16-row tiles with a k split;
// 3-8 the decode stream kernel (expert_gemm_stream_kernel.cuh, MXFP4 and FP8 only; BF16 runs
// tile 2 for 4, tile 0 else); 9-10 the register-streaming ("GEMV") kernel
// (expert_gemm_gemv_kernel.cuh, MXFP4 and FP8 only; BF16 runs tile 0). Each returns false (nothing launched) when K (per split) is too
// large for the kernel's shared memory, or when a split launch's grid has more output tiles than
// num_counters.
bool launch_mxfp4(const Args& a, int tactic);
bool launch_fp8(const Args& a, int tactic);
bool launch_bf16(const Args& a, int tactic);
bool launch_stream_mxfp4(const Args& a, int tactic);
bool launch_stream_fp8(const Args& a, int tactic);
bool launch_gemv_mxfp4(const Args& a, int tactic);
bool launch_gemv_fp8(const Args& a, int tactic);

}  // namespace dsa::ops::cuda::egemm
