// A tensor seen as a matrix of rows x cols with unit column stride: every leading dimension is
// folded into "rows" (they must be collapsible into one stride), the last dimension is "cols".
// Lets the row-wise ops (norms) run on strided views such as the first 512 of 576 columns.
#pragma once
#include <cstdint>
#include <string_view>

#include "dsa/core/tensor.h"

namespace dsa::ops {

struct RowView {
  char* base = nullptr;     // first element
  int64_t rows = 0;
  int64_t cols = 0;
  int64_t row_stride = 0;   // elements between row starts
  DType dtype = DType::F32;
  Device device;
};

// Throws dsa::Error naming `what` when t is undefined, 0-d, has a non-unit last stride, or has
// leading dimensions that do not fold into a single row stride.
RowView row_view(const Tensor& t, std::string_view what);

}  // namespace dsa::ops
