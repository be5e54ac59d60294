// Small device-generic tensor steps of the model forwards that are not worth a family of their
// own: dtype casts and strided copies, residual adds, embedding lookups and the per-head matrix
// products of the absorbed MLA (GLM's W_UK / W_UV). Every function takes tensors on ONE device
// (CPU: plain loops with float accumulation, the reference; CUDA: kernels in tensor_ops.cu) and
// throws a dsa::Error naming the argument when shapes, dtypes or devices do not fit. Activation
// dtypes are f32 and bf16; conversions round to nearest even (dsa/core/dtype_conv.h) on both.
#pragma once
#include <cstdint>

#include "dsa/core/tensor.h"

namespace dsa::ops {

// dst = src converted to dst's dtype. Same shape (at most 4 dims), f32|bf16 each, ANY strides on
// both sides (views from slice/select/reshape), same device. Overlapping dst/src: not allowed.
void copy_cast(const Tensor& dst, const Tensor& src);

// A new contiguous tensor on x's device holding x converted to `to` (x may be strided).
Tensor cast(const Tensor& x, DType to);

// acc += x elementwise. acc f32 contiguous; x f32|bf16 contiguous, same shape and device.
void add_into(const Tensor& acc, const Tensor& x);

// out[t][...] = table[ids[t]] converted to out's dtype.
//   table: [V][D] f32|bf16 contiguous;  ids: [T] i32 on the table's device;
//   out: [T][D] or [T][R][D] f32|bf16 contiguous (the row is repeated R times: V4's hc streams).
// An id outside [0, V) is an error naming the token on the CPU; the CUDA kernel writes zeros for
// it (never reads out of bounds) — callers check ids on the host first.
void embed_rows(const Tensor& table, const Tensor& ids, const Tensor& out);

// out[t][h][n] = sum_k x[t][h][k] * w[h][n][k] for h < w.size(0).
//   x: [T][>=H][K] f32|bf16 (any strides, last dim contiguous);  w: [H][N][K] f32|bf16 contiguous;
//   out: [T][>=H][N] f32|bf16 (any strides, last dim contiguous). Float accumulation.
// CUDA: bf16 w with T <= 16 and K % 8 == 0 streams the weights through a GEMV kernel
// (head_matmul_gemv.cu: the decode case); bf16 x and w with T >= 17 and 16-byte aligned strides
// run as one cuBLASLt strided-batched GEMM (batch = head, tensor cores); everything else, and all
// of it with DSA_HEAD_MATMUL=kernel, on a shared-memory tiled SIMT kernel (tensor_ops.cu).
// DSA_HEAD_MATMUL=gemv makes a problem the GEMV refuses an error (tests pin the route with it).
void head_matmul(const Tensor& x, const Tensor& w, const Tensor& out);

}  // namespace dsa::ops
