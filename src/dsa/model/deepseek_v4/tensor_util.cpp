#include "dsa/model/deepseek_v4/tensor_util.h"

#include "dsa/core/error.h"

namespace dsa::model::v4 {

std::vector<int64_t> to_host_i64(const Tensor& t) {
  DSA_CHECK(t.dtype() == DType::I64 || t.dtype() == DType::I32, "deepseek_v4: expected an i32/i64 tensor, got {}",
            t.str());
  const Tensor h = t.to(Device::cpu());
  std::vector<int64_t> v(static_cast<size_t>(h.numel()));
  for (int64_t i = 0; i < h.numel(); ++i)
    v[i] = h.dtype() == DType::I64 ? h.data<int64_t>()[i] : static_cast<int64_t>(h.data<int32_t>()[i]);
  return v;
}

}  // namespace dsa::model::v4
