#include <cstdlib>

#include "common/testing.h"
#include "dsa/core/device.h"
#include "dsa/core/tensor.h"

using namespace dsa;

TEST(Tensor, EmptyContiguousAndViews) {
  Tensor t = Tensor::empty({2, 3, 4}, DType::F32);
  EXPECT_TRUE(t.is_contiguous());
  EXPECT_EQ(t.numel(), 24);
  EXPECT_EQ(t.nbytes(), 96u);
  for (int i = 0; i < 24; ++i) t.data<float>()[i] = static_cast<float>(i);
  Tensor s = t.slice(1, 1, 3);
  EXPECT_EQ(s.shape(), (Shape{2, 2, 4}));
  EXPECT_FALSE(s.is_contiguous());
  EXPECT_EQ(s.data<float>()[0], 4.f);
  Tensor c = s.contiguous();
  EXPECT_TRUE(c.is_contiguous());
  EXPECT_EQ(c.data<float>()[8], 16.f);  // [1][0][0] of the slice = t[1][1][0]
  Tensor r = t.select(0, 1);
  EXPECT_EQ(r.shape(), (Shape{3, 4}));
  EXPECT_EQ(r.data<float>()[0], 12.f);
  Tensor v = t.reshape({6, -1});
  EXPECT_EQ(v.shape(), (Shape{6, 4}));
  EXPECT_THROW(s.reshape({16}), Error);
  EXPECT_THROW(t.reshape({5, -1}), Error);
  EXPECT_THROW(t.slice(1, 2, 4), Error);
  EXPECT_THROW(t.select(0, 2), Error);
}

TEST(Tensor, BorrowedAndChecks) {
  float buf[6] = {1, 2, 3, 4, 5, 6};
  Tensor t = Tensor::from_blob(buf, {2, 3}, DType::F32);
  EXPECT_EQ(t.data<float>(), buf);
  t.check("x", DType::F32, {2, 3});
  try {
    t.check("layers.0.attn.wq_a.weight", DType::BF16, {2, 3});
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("layers.0.attn.wq_a.weight"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("bf16"), std::string::npos);
  }
  EXPECT_THROW(t.view_as(DType::BF16), Error);
  EXPECT_EQ(t.view_as(DType::I32).dtype(), DType::I32);
}

TEST(Tensor, CudaRoundTrip) {
  DSA_REQUIRE_CUDA();
  test::Rng rng;
  Tensor h = test::random_f32({37, 5}, rng);
  Tensor d = h.to(Device::cuda());
  EXPECT_TRUE(d.device().is_cuda());
  Tensor back = d.to(Device::cpu());
  for (int i = 0; i < h.numel(); ++i) ASSERT_EQ(back.data<float>()[i], h.data<float>()[i]);
}

TEST(Device, CapabilityParseAndOverride) {
  EXPECT_EQ(Capability::parse("12.0"), (Capability{12, 0}));
  EXPECT_EQ(Capability::parse("9.0").value(), 90);
  EXPECT_EQ(Capability::parse("sm_120").str(), "12.0");
  EXPECT_EQ(Capability::parse("121"), (Capability{12, 1}));
  EXPECT_THROW(Capability::parse("twelve"), Error);
  EXPECT_THROW(Capability::parse("12."), Error);
  setenv("DSA_DEVICE_CAPABILITY", "12.0", 1);
  EXPECT_EQ(effective_capability(0), (Capability{12, 0}));
  setenv("DSA_DEVICE_CAPABILITY", "bogus", 1);
  EXPECT_THROW(capability_override(), Error);
  unsetenv("DSA_DEVICE_CAPABILITY");
  EXPECT_FALSE(capability_override().has_value());
}
