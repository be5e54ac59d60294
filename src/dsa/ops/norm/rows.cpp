#include "dsa/ops/norm/rows.h"

namespace dsa::ops {

RowView row_view(const Tensor& t, std::string_view what) {
  DSA_CHECK(t.defined(), "{}: tensor is undefined", what);
  DSA_CHECK(t.dim() >= 1, "{}: expected at least 1 dimension, got a scalar", what);
  const int64_t nd = t.dim();
  DSA_CHECK(t.size(nd - 1) <= 1 || t.stride(nd - 1) == 1, "{}: last dimension must be contiguous (stride {}), got {}",
            what, t.stride(nd - 1), t.str());
  RowView v;
  v.base = static_cast<char*>(t.raw());
  v.cols = t.size(nd - 1);
  v.rows = 1;
  for (int64_t d = 0; d + 1 < nd; ++d) v.rows *= t.size(d);
  v.row_stride = nd >= 2 ? t.stride(nd - 2) : v.cols;
  // Leading dims must fold: stride[d] == stride[d+1] * size[d+1] for every non-trivial d.
  for (int64_t d = 0; d + 2 < nd; ++d) {
    if (t.size(d) <= 1) continue;
    DSA_CHECK(t.stride(d) == t.stride(d + 1) * t.size(d + 1),
              "{}: leading dimensions of {} (strides {}) cannot be folded into rows", what, t.str(),
              shape_str(t.strides()));
  }
  v.dtype = t.dtype();
  v.device = t.device();
  return v;
}

}  // namespace dsa::ops
