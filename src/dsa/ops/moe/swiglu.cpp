// CPU reference of the clamped SwiGLU and dispatch to CUDA.
#include "dsa/ops/moe/swiglu.h"

#include "dsa/core/dtype_conv.h"
#ifdef DSA_WITH_CUDA
#include "dsa/ops/moe/cuda_ops.h"
#endif

namespace dsa::ops {

void swiglu(const Tensor& gu, Tensor& out, float limit) {
  DSA_CHECK(gu.defined() && gu.dim() == 2 && gu.dtype() == DType::BF16 && gu.size(1) % 2 == 0 && gu.is_contiguous(),
            "swiglu: gu must be contiguous bf16 [rows][2I], got {}", gu.defined() ? gu.str() : "undefined");
  const int64_t rows = gu.size(0), I = gu.size(1) / 2;
  out.check("swiglu: out", DType::BF16, {rows, I});
  DSA_CHECK(out.is_contiguous() && out.device() == gu.device(), "swiglu: out must be contiguous on {}", gu.device().str());
  DSA_CHECK(limit >= 0.f, "swiglu: limit {} must be >= 0", limit);
  if (gu.device().is_cuda()) {
#ifdef DSA_WITH_CUDA
    cuda::swiglu(gu, out, limit);
    return;
#else
    fail("swiglu: no CUDA in this build");
#endif
  }
  const uint16_t* g = gu.data<uint16_t>();
  uint16_t* o = out.data<uint16_t>();
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t i = 0; i < I; ++i)
      o[r * I + i] = f32_to_bf16_bits(
          swiglu_value(bf16_bits_to_f32(g[r * 2 * I + i]), bf16_bits_to_f32(g[r * 2 * I + I + i]), limit));
}

}  // namespace dsa::ops
