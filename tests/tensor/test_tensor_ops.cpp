// CPU reference tests of ops/tensor (copy_cast, add_into, embed_rows, head_matmul): hand-made
// values and error texts. The CUDA kernels are compared against these in *_cuda tests.
#include <cmath>

#include "dsa/core/dtype_conv.h"
#include "dsa/ops/tensor/tensor_ops.h"
#include "common/op_helpers.h"

using namespace dsa;
using namespace dsa::ops;
using namespace dsa::test;

TEST(ModelopsTensorOps, CopyCastStridedAndRounding) {
  Rng rng;
  Tensor src = random_f32({3, 5, 4}, rng);
  Tensor dst = Tensor::zeros({3, 7, 4}, DType::BF16);
  copy_cast(dst.slice(1, 1, 6), src);
  for (int64_t a = 0; a < 3; ++a)
    for (int64_t b = 0; b < 7; ++b)
      for (int64_t c = 0; c < 4; ++c) {
        const uint16_t got = dst.data<uint16_t>()[(a * 7 + b) * 4 + c];
        const uint16_t want = (b >= 1 && b < 6) ? f32_to_bf16_bits(src.data<float>()[(a * 5 + b - 1) * 4 + c]) : 0;
        ASSERT_EQ(got, want) << a << " " << b << " " << c;
      }
  // strided source (select of the middle dim), bf16 -> f32 is exact
  Tensor back = cast(dst.select(1, 3), DType::F32);
  ASSERT_EQ(back.shape(), (Shape{3, 4}));
  for (int64_t a = 0; a < 3; ++a)
    for (int64_t c = 0; c < 4; ++c)
      EXPECT_EQ(back.data<float>()[a * 4 + c], bf16_bits_to_f32(dst.data<uint16_t>()[(a * 7 + 3) * 4 + c]));
  EXPECT_NE(error_of([&] { copy_cast(dst, src); }).find("shapes differ"), std::string::npos);
}

TEST(ModelopsTensorOps, AddIntoAndEmbed) {
  Tensor acc = Tensor::empty({2, 2}, DType::F32);
  for (int i = 0; i < 4; ++i) acc.data<float>()[i] = static_cast<float>(i);
  Tensor x = cast(acc, DType::BF16);
  add_into(acc, x);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(acc.data<float>()[i], 2.f * static_cast<float>(i));

  Tensor table = Tensor::empty({3, 2}, DType::F32);
  for (int i = 0; i < 6; ++i) table.data<float>()[i] = static_cast<float>(10 + i);
  Tensor ids = Tensor::empty({2}, DType::I32);
  ids.data<int32_t>()[0] = 2;
  ids.data<int32_t>()[1] = 0;
  Tensor out = Tensor::empty({2, 3, 2}, DType::F32);
  embed_rows(table, ids, out);
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(out.data<float>()[r * 2 + 0], 14.f);
    EXPECT_EQ(out.data<float>()[(3 + r) * 2 + 1], 11.f);
  }
  ids.data<int32_t>()[1] = 3;
  EXPECT_NE(error_of([&] { embed_rows(table, ids, out); }).find("token 1 has id 3"), std::string::npos);
}

TEST(ModelopsTensorOps, HeadMatmulAgainstDoubleLoop) {
  Rng rng;
  const int64_t T = 3, H = 2, Hx = 4, N = 5, K = 7;
  Tensor x = random_bf16({T, Hx, K}, rng);
  Tensor w = random_f32({H, N, K}, rng);
  Tensor out = Tensor::empty({T, Hx, N}, DType::F32);
  poison(out);
  head_matmul(x, w, out);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t n = 0; n < N; ++n) {
        double s = 0;
        for (int64_t k = 0; k < K; ++k)
          s += double(bf16_bits_to_f32(x.data<uint16_t>()[(t * Hx + h) * K + k])) * w.data<float>()[(h * N + n) * K + k];
        EXPECT_NEAR(out.data<float>()[(t * Hx + h) * N + n], s, 1e-5 * (1 + std::fabs(s)));
      }
}
