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
  const void* scale;  // MXFP4: u8 [E][N][K/32]; FP8: f32 [E][ceil(N/128)][K/128]; BF16: unused
  int E, N, K;
  void* out;  // bf16 [rows][ldo]
  int ldo;
  int swiglu;
  float limit;
};

// tile 0: 16-row tiles (decode); tile 1: 64-row tiles (prefill).
void launch_mxfp4(const Args& a, int tile);
void launch_fp8(const Args& a, int tile);
void launch_bf16(const Args& a, int tile);
void launch_ue8m0_to_f32(const uint8_t* in, float* out, int64_t n);

}  // namespace dsa::ops::cuda::egemm
