// Launchers of the CUDA norm kernels (norm.cu). Only declared/defined when DSA_WITH_CUDA.
#pragma once
#include <cstdint>

#include "dsa/core/dtype.h"

namespace dsa::ops::cuda {

struct RowNormArgs {
  const void* x;       // f32 and written back when delta is set
  const void* delta;   // null, or x += delta first (add_rms_norm: x, delta contiguous rows of cols)
  void* out;
  const void* weight;  // may be null (unweighted)
  const void* bias;    // may be null
  int64_t rows, cols, x_row_stride, out_row_stride;
  DType x_dtype, out_dtype, weight_dtype, bias_dtype, delta_dtype;
  float eps;
  bool layer_norm;  // false: RMSNorm
};

// Rows up to this many columns are normalised from registers (norm.cu); longer rows by the
// strided three-pass kernel.
constexpr int64_t kRegMaxCols = 16384;
// 4-column groups per thread of the register kernel for a row of `cols` (0: strided kernel).
int row_norm_reg_groups_per_thread(int64_t cols);

void row_norm(const RowNormArgs& a);

}  // namespace dsa::ops::cuda
