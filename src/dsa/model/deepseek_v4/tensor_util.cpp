#include "dsa/model/deepseek_v4/tensor_util.h"

#include "dsa/core/error.h"
#include "dsa/ops/norm/elem.h"

namespace dsa::model::v4 {

Tensor cast(const Tensor& x, DType to) {
  DSA_CHECK(!x.device().is_cuda(), "deepseek_v4: cast on {} is not implemented yet (CPU only)", x.device().str());
  ops::check_activation_dtype("cast input", x.dtype());
  ops::check_activation_dtype("cast output", to);
  const Tensor src = x.contiguous();
  Tensor out = Tensor::empty(x.shape(), to, x.device());
  const int64_t n = src.numel();
  for (int64_t i = 0; i < n; ++i) ops::store_f(out.raw(), to, i, ops::load_f(src.raw(), src.dtype(), i));
  return out;
}

void add_into(const Tensor& acc, const Tensor& x) {
  DSA_CHECK(!acc.device().is_cuda(), "deepseek_v4: add_into on CUDA is not implemented yet");
  DSA_CHECK(acc.dtype() == DType::F32 && acc.is_contiguous() && x.is_contiguous() && acc.shape() == x.shape(),
            "deepseek_v4: add_into needs contiguous f32 acc and x of the same shape, got {} and {}", acc.str(), x.str());
  float* a = acc.data<float>();
  for (int64_t i = 0; i < acc.numel(); ++i) a[i] += ops::load_f(x.raw(), x.dtype(), i);
}

std::vector<int64_t> to_host_i64(const Tensor& t) {
  const Tensor h = t.to(Device::cpu());
  std::vector<int64_t> v(static_cast<size_t>(h.numel()));
  for (int64_t i = 0; i < h.numel(); ++i)
    v[i] = h.dtype() == DType::I64 ? h.data<int64_t>()[i] : static_cast<int64_t>(h.data<int32_t>()[i]);
  return v;
}

}  // namespace dsa::model::v4
