// Host fallbacks of the benchmark fills (CPU tensors) and dispatch to CUDA.
#include "dsa/ops/moe/random_fill.h"

#include "dsa/core/dtype_conv.h"
#ifdef DSA_WITH_CUDA
#include "dsa/core/cuda_launch.h"
#include "dsa/ops/moe/cuda/kernels.h"
#endif

namespace dsa::ops {


static uint32_t mix(uint64_t i, uint64_t seed) {
  uint64_t x = i * 0x9E3779B97F4A7C15ull + seed * 0xBF58476D1CE4E5B9ull;
  x ^= x >> 31;
  x *= 0x94D049BB133111EBull;
  x ^= x >> 29;
  return static_cast<uint32_t>(x >> 16);
}

// kind: 0 bytes, 1 bf16, 2 f32
static void fill(Tensor& t, int kind, uint64_t seed, float lo, float hi, int flag) {
  DSA_CHECK(t.is_contiguous(), "random_fill: tensor must be contiguous");
  const int64_t n = kind == 0 ? static_cast<int64_t>(t.nbytes()) : t.numel();
  if (t.device().is_cuda()) {
#ifdef DSA_WITH_CUDA
    cuda::launch_random_fill(t.raw(), n, kind, seed, lo, hi, flag);
    cuda_launch::check_launch("random_fill fill_kernel");
    return;
#else
    fail("random_fill: no CUDA in this build");
#endif
  }
  for (int64_t i = 0; i < n; ++i) {
    const float u = static_cast<float>(mix(i, seed) & 0xFFFFFF) / 16777216.f;
    if (kind == 0) {
      uint8_t b = static_cast<uint8_t>(lo + static_cast<int>(u * (hi - lo + 1)));
      if (flag && (b & 0x7F) == 0x7F) b -= 1;
      t.data<uint8_t>()[i] = b;
    } else if (kind == 1) {
      t.data<uint16_t>()[i] = f32_to_bf16_bits(lo + u * (hi - lo));
    } else {
      t.data<float>()[i] = lo + u * (hi - lo);
    }
  }
}

void random_fill_bytes(Tensor& t, uint64_t seed, int lo, int hi, bool e4m3_finite) {
  DSA_CHECK(0 <= lo && lo <= hi && hi <= 255, "random_fill_bytes: bad range [{}, {}]", lo, hi);
  fill(t, 0, seed, static_cast<float>(lo), static_cast<float>(hi), e4m3_finite ? 1 : 0);
}
void random_fill_bf16(Tensor& t, uint64_t seed, float a) {
  DSA_CHECK(t.dtype() == DType::BF16, "random_fill_bf16: tensor is {}", dtype_name(t.dtype()));
  fill(t, 1, seed, -a, a, 0);
}
void random_fill_f32(Tensor& t, uint64_t seed, float lo, float hi) {
  DSA_CHECK(t.dtype() == DType::F32, "random_fill_f32: tensor is {}", dtype_name(t.dtype()));
  fill(t, 2, seed, lo, hi, 0);
}

}  // namespace dsa::ops
