// Small tensor steps of the GLM forward that have no op of their own yet: embedding rows,
// residual adds, the per-head matrix products of the absorbed MLA (q_nope -> latent query,
// latent output -> v) and strided copies between head layouts. CPU loops (float accumulation);
// CUDA tensors are refused with a clear error (the forward hands them host copies), except by
// add_into, which makes the round trip itself: correct but slow until these get kernels.
#pragma once
#include <cstdint>
#include <vector>

#include "dsa/core/tensor.h"

namespace dsa::model::glm5 {

// out f32 [T][hidden] (CPU) = embed[ids[t]] (embed bf16 or f32 [vocab][hidden] on the CPU).
// Throws naming the token when an id is outside [0, vocab).
void embed_rows(const Tensor& embed, const std::vector<int32_t>& ids, const Tensor& out);

// acc[t][i] += delta[t][i]; acc f32, delta bf16 or f32, same shape [T][N], contiguous, same device.
void add_into(const Tensor& acc, const Tensor& delta);

// out[t][h][n] = sum_k x[t][h][k] * w[h][n][k] for h < w.size(0).
// x: [T][>=H][K] f32|bf16 (any strides, last dim contiguous); w: f32 [H][N][K] contiguous;
// out: [T][>=H][N] f32|bf16 (any strides, last dim contiguous).
void head_matmul(const Tensor& x, const Tensor& w, const Tensor& out);

// dst = src for 3-D tensors of the same shape and dtype (any strides, last dim contiguous).
void copy_3d(const Tensor& dst, const Tensor& src);

}  // namespace dsa::model::glm5
