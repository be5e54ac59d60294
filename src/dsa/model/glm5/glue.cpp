#include "dsa/model/glm5/glue.h"

#include <cstring>

#include "dsa/core/error.h"
#include "dsa/ops/norm/elem.h"

namespace dsa::model::glm5 {

namespace {
void require_cpu(const char* what, const Tensor& t) {
  DSA_CHECK(!t.device().is_cuda(), "glm5 {}: CUDA tensors are not supported by this step yet ({})", what, t.str());
}
}  // namespace

void embed_rows(const Tensor& embed, const std::vector<int32_t>& ids, const Tensor& out) {
  require_cpu("embed_rows", embed);
  require_cpu("embed_rows", out);
  const int64_t V = embed.size(0), D = embed.size(1);
  out.check("glm5 embed_rows: out", DType::F32, {static_cast<int64_t>(ids.size()), D});
  DSA_CHECK(embed.is_contiguous() && out.is_contiguous(), "glm5 embed_rows: tensors must be contiguous");
  for (size_t t = 0; t < ids.size(); ++t) {
    DSA_CHECK(ids[t] >= 0 && ids[t] < V, "token {} has id {} outside the vocabulary [0, {})", t, ids[t], V);
    float* o = out.data<float>() + static_cast<int64_t>(t) * D;
    for (int64_t i = 0; i < D; ++i) o[i] = ops::load_f(embed.raw(), embed.dtype(), ids[t] * D + i);
  }
}

void add_into(const Tensor& acc, const Tensor& delta) {
  if (acc.device().is_cuda()) {  // host round trip until this gets a kernel
    Tensor a = acc.to(Device::cpu());
    add_into(a, delta.to(Device::cpu()));
    Tensor(acc).copy_from(a);  // a handle copy shares the storage
    return;
  }
  require_cpu("add_into", delta);
  DSA_CHECK(acc.dtype() == DType::F32 && acc.shape() == delta.shape() && acc.is_contiguous() && delta.is_contiguous(),
            "glm5 add_into: {} += {}", acc.str(), delta.str());
  float* a = acc.data<float>();
  for (int64_t i = 0; i < acc.numel(); ++i) a[i] += ops::load_f(delta.raw(), delta.dtype(), i);
}

void head_matmul(const Tensor& x, const Tensor& w, const Tensor& out) {
  require_cpu("head_matmul", x);
  require_cpu("head_matmul", out);
  DSA_CHECK(x.dim() == 3 && w.dim() == 3 && out.dim() == 3 && w.dtype() == DType::F32 && w.is_contiguous(),
            "glm5 head_matmul: x {} w {} out {}", x.str(), w.str(), out.str());
  const int64_t T = x.size(0), H = w.size(0), N = w.size(1), K = w.size(2);
  DSA_CHECK(x.size(1) >= H && x.size(2) == K && out.size(0) == T && out.size(1) >= H && out.size(2) == N &&
                x.stride(2) == 1 && out.stride(2) == 1,
            "glm5 head_matmul: x {} w {} out {}", x.str(), w.str(), out.str());
  const size_t xe = dtype_size(x.dtype()), oe = dtype_size(out.dtype());
  std::vector<float> xr(static_cast<size_t>(K));
  for (int64_t t = 0; t < T; ++t)
    for (int64_t h = 0; h < H; ++h) {
      const char* xp = static_cast<const char*>(x.raw()) + (t * x.stride(0) + h * x.stride(1)) * xe;
      for (int64_t k = 0; k < K; ++k) xr[k] = ops::load_f(xp, x.dtype(), k);
      char* op = static_cast<char*>(out.raw()) + (t * out.stride(0) + h * out.stride(1)) * oe;
      const float* wh = w.data<float>() + h * N * K;
      for (int64_t n = 0; n < N; ++n) {
        const float* wr = wh + n * K;
        float s = 0.f;
        for (int64_t k = 0; k < K; ++k) s += xr[k] * wr[k];
        ops::store_f(op, out.dtype(), n, s);
      }
    }
}

void copy_3d(const Tensor& dst, const Tensor& src) {
  require_cpu("copy_3d", dst);
  require_cpu("copy_3d", src);
  DSA_CHECK(dst.dim() == 3 && dst.shape() == src.shape() && dst.dtype() == src.dtype() && dst.stride(2) == 1 &&
                src.stride(2) == 1,
            "glm5 copy_3d: {} <- {}", dst.str(), src.str());
  const size_t e = dtype_size(dst.dtype()), row = static_cast<size_t>(dst.size(2)) * e;
  for (int64_t a = 0; a < dst.size(0); ++a)
    for (int64_t b = 0; b < dst.size(1); ++b)
      std::memcpy(static_cast<char*>(dst.raw()) + (a * dst.stride(0) + b * dst.stride(1)) * e,
                  static_cast<const char*>(src.raw()) + (a * src.stride(0) + b * src.stride(1)) * e, row);
}

}  // namespace dsa::model::glm5
