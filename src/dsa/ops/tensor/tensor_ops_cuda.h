// Raw-pointer launchers of the CUDA tensor-op kernels (tensor_ops.cu). tensor_ops.cpp checks the
// tensors, selects the device and fills these structs; nothing here knows Tensor or fmt. All
// kernels run on the legacy default stream, like the other model ops. Only called when
// DSA_WITH_CUDA.
#pragma once
#include <cstdint>

#include "dsa/core/dtype.h"

namespace dsa::ops::cuda {

// dst[i0][i1][i2][i3] = src[i0][i1][i2][i3] converted (f32|bf16 each). Shapes are padded on the
// left with 1 to 4 dims; strides in elements (any, views allowed); dst and src must not overlap.
struct CopyCastArgs {
  void* dst;
  const void* src;
  int64_t shape[4];
  int64_t dst_stride[4], src_stride[4];
  DType dst_dtype, src_dtype;
};
void copy_cast(const CopyCastArgs& a);

// acc[i] += x[i] for i < n; acc f32, x f32|bf16, both contiguous.
void add_into(float* acc, const void* x, DType x_dtype, int64_t n);

// out[t][r][:] = table[ids[t]][:] for r < repeat (zeros when ids[t] is outside [0, vocab)).
struct EmbedRowsArgs {
  const void* table;  // [vocab][dim] contiguous
  const int32_t* ids; // [tokens] (device)
  void* out;          // [tokens][repeat][dim] contiguous
  int64_t vocab, dim, tokens, repeat;
  DType table_dtype, out_dtype;
};
void embed_rows(const EmbedRowsArgs& a);

// out[t][h][n] = sum_k x[t][h][k] * w[h][n][k], float accumulation.
struct HeadMatmulArgs {
  const void* x;  // element (t, h, k) at t * x_stride_t + h * x_stride_h + k
  const void* w;  // [heads][n][k] contiguous
  void* out;      // element (t, h, n) at t * out_stride_t + h * out_stride_h + n
  int64_t tokens, heads, n, k;
  int64_t x_stride_t, x_stride_h, out_stride_t, out_stride_h;
  DType x_dtype, w_dtype, out_dtype;
};
void head_matmul(const HeadMatmulArgs& a);
// The decode route (1 <= T <= kHeadMatmulGemvMaxTokens, bf16 w, K % 8 == 0 — any size —, 16-byte
// aligned w; x f32|bf16 with any strides, fastest when its rows are 16-byte aligned): a weight-
// streaming GEMV kernel (head_matmul_gemv.cu). Returns false, doing nothing, when the problem does
// not fit it.
constexpr int64_t kHeadMatmulGemvMaxTokens = 16;
bool head_matmul_gemv(const HeadMatmulArgs& a);
// The same through one cuBLASLt strided-batched GEMM (head_matmul_cublaslt.cpp; tensor cores).
// Returns false, doing nothing, when it does not take the problem: not bf16 x and w, T < 2,
// unaligned pointers or strides, or no algorithm.
bool head_matmul_cublaslt(const HeadMatmulArgs& a);

}  // namespace dsa::ops::cuda
