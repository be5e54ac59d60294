// Packed UE8M0 layouts (ue8m0_pack.h): byte order, the round-up rule, the MN-major TMA-aligned
// strides, the k-grouped variant (checked against per-group MN-major packing, as DeepGEMM's own
// test does), invalid inputs, CUDA vs CPU.
#include <cmath>
#include <cstring>

#include "dsa/core/dtype_conv.h"
#include "dsa/formats/ue8m0_pack.h"
#include "util.h"

using namespace dsa;
using namespace dsa::formats;
using dsa::test::Rng;

namespace {

// DeepGEMM's rule written out: exponent field, plus one when the mantissa is not zero.
uint8_t ue8m0_rule(float s) {
  uint32_t u;
  std::memcpy(&u, &s, 4);
  return static_cast<uint8_t>(((u >> 23) & 0xFF) + ((u & 0x7FFFFF) != 0));
}

uint8_t byte_of(int32_t word, int j) { return static_cast<uint8_t>(static_cast<uint32_t>(word) >> (8 * j)); }

// Positive normal scales; half of them powers of two.
Tensor random_scales(const Shape& shape, Rng& rng) {
  Tensor t = Tensor::empty(shape, DType::F32);
  for (int64_t i = 0; i < t.numel(); ++i) {
    float v = std::ldexp(rng.uniform(1.f, 2.f), static_cast<int>(rng.randint(-30, 10)));
    if (rng.uniform() < 0.5f) v = std::ldexp(1.f, static_cast<int>(rng.randint(-30, 10)));
    t.data<float>()[i] = v;
  }
  return t;
}

void pack_mn(const Tensor& sf, Tensor& out) {
  Ue8m0MnMajorParams p;
  p.sf = sf;
  p.out = out;
  pack_ue8m0_mn_major(p);
}

void pack_kg(const Tensor& sf, const std::vector<int64_t>& ks, int gran_k, Tensor& out) {
  Ue8m0KGroupedParams p;
  p.sf = sf;
  p.ks = ks;
  p.gran_k = gran_k;
  p.out = out;
  pack_ue8m0_k_grouped(p);
}

}  // namespace

TEST(Ue8m0Pack, ByteOrderAndRoundUp) {
  Tensor sf = Tensor::empty({1, 5}, DType::F32);
  const float v[5] = {1.f, 2.f, 0.5f, 3.f, 0.75f};  // 3 -> 4 (129), 0.75 -> 1 (127)
  std::memcpy(sf.data<float>(), v, sizeof v);
  Tensor out = Tensor::empty({1, 2}, DType::I32);
  test::poison(out);
  Ue8m0PackParams p;
  p.sf = sf;
  p.out = out;
  pack_ue8m0(p);
  EXPECT_EQ(static_cast<uint32_t>(out.data<int32_t>()[0]), 127u | 128u << 8 | 126u << 16 | 129u << 24);
  EXPECT_EQ(static_cast<uint32_t>(out.data<int32_t>()[1]), 127u);
}

TEST(Ue8m0Pack, RoundUpRuleMatchesDeepGemmFormula) {
  Rng rng;
  for (int i = 0; i < 100000; ++i) {
    const float s = std::ldexp(rng.uniform(1.f, 2.f), static_cast<int>(rng.randint(-120, 120)));
    ASSERT_EQ(f32_to_ue8m0_ceil(s), ue8m0_rule(s)) << s;
    ASSERT_GE(ue8m0_to_f32(f32_to_ue8m0_ceil(s)), s);
  }
}

TEST(Ue8m0Pack, MnMajorTmaAlignedStrides) {
  Rng rng;
  for (auto [G, mn, sf_k] : {std::tuple<int64_t, int64_t, int64_t>{3, 7, 6}, {1, 8, 4}, {2, 13, 9}, {1, 1, 1}}) {
    SCOPED_TRACE(std::to_string(G) + "x" + std::to_string(mn) + "x" + std::to_string(sf_k));
    Tensor sf = random_scales({G, mn, sf_k}, rng);
    const int64_t amn = (mn + 3) / 4 * 4, pk = (sf_k + 3) / 4;
    EXPECT_EQ(mn_major_packed_shape(sf.shape()), (Shape{G, pk, amn}));
    Tensor out = Tensor::empty({G, pk, amn}, DType::I32);
    test::poison(out);
    pack_mn(sf, out);
    const int32_t* o = out.data<int32_t>();
    // Logical [G][mn][pk] with strides (pk * align(mn,4), 1, align(mn,4)).
    for (int64_t g = 0; g < G; ++g)
      for (int64_t m = 0; m < amn; ++m)
        for (int64_t i = 0; i < pk; ++i) {
          const int32_t w = o[g * (pk * amn) + m * 1 + i * amn];
          for (int j = 0; j < 4; ++j) {
            const int64_t k = 4 * i + j;
            const uint8_t want = (m < mn && k < sf_k) ? ue8m0_rule(sf.data<float>()[(g * mn + m) * sf_k + k]) : 0;
            ASSERT_EQ(byte_of(w, j), want) << "g " << g << " m " << m << " k " << k;
          }
        }
    // UE8M0 byte input gives the same words.
    Tensor bytes = Tensor::empty({G, mn, sf_k}, DType::E8M0);
    for (int64_t i = 0; i < sf.numel(); ++i) bytes.data<uint8_t>()[i] = ue8m0_rule(sf.data<float>()[i]);
    Tensor out2 = Tensor::empty({G, pk, amn}, DType::I32);
    test::poison(out2);
    pack_mn(bytes, out2);
    EXPECT_EQ(test::host_bytes(out), test::host_bytes(out2));
  }
  // 2-D input: [mn][sf_k] -> [pk][align(mn,4)], same words as G = 1.
  Tensor sf = random_scales({5, 3}, rng);
  Tensor out = Tensor::empty({1, 8}, DType::I32), out3 = Tensor::empty({1, 1, 8}, DType::I32);
  pack_mn(sf, out);
  pack_mn(sf.reshape({1, 5, 3}), out3);
  EXPECT_EQ(test::host_bytes(out), test::host_bytes(out3));
}

TEST(Ue8m0Pack, KGroupedPacksEachGroupSeparately) {
  Rng rng;
  const std::vector<int64_t> ks = {256, 0, 640, 641, 100};  // sf rows 2, 0, 5, 6, 1 (gran 128)
  const int64_t mn = 6, amn = 8;
  EXPECT_EQ(k_grouped_sf_rows(ks, 128), 14);
  EXPECT_EQ(k_grouped_packed_shape(ks, 128, mn), (Shape{1 + 0 + 2 + 2 + 1, amn}));
  Tensor sf = random_scales({14, mn}, rng);
  Tensor out = Tensor::empty({6, amn}, DType::I32);
  test::poison(out);
  pack_kg(sf, ks, 128, out);
  // Reference: each group's rows [r0, r0 + n) transposed to [mn][n] and packed MN-major.
  int64_t r0 = 0, o0 = 0;
  for (int64_t k : ks) {
    const int64_t n = (k + 127) / 128, pk = (n + 3) / 4;
    if (n == 0) continue;
    Tensor t = Tensor::empty({mn, n}, DType::F32);
    for (int64_t m = 0; m < mn; ++m)
      for (int64_t i = 0; i < n; ++i) t.data<float>()[m * n + i] = sf.data<float>()[(r0 + i) * mn + m];
    Tensor ref = Tensor::empty({pk, amn}, DType::I32);
    pack_mn(t, ref);
    for (int64_t i = 0; i < pk * amn; ++i)
      ASSERT_EQ(out.data<int32_t>()[o0 * amn + i], ref.data<int32_t>()[i]) << "group starting at sf row " << r0;
    r0 += n;
    o0 += pk;
  }
  EXPECT_EQ(o0, 6);
  // Gran 32, mn a multiple of 4.
  const std::vector<int64_t> ks2 = {96, 33};  // rows 3, 2 -> packed 1 + 1
  Tensor sf2 = random_scales({5, 4}, rng);
  Tensor out2 = Tensor::empty({2, 4}, DType::I32);
  pack_kg(sf2, ks2, 32, out2);
  for (int64_t m = 0; m < 4; ++m) {
    const int32_t w0 = out2.data<int32_t>()[m], w1 = out2.data<int32_t>()[4 + m];
    for (int j = 0; j < 3; ++j) EXPECT_EQ(byte_of(w0, j), ue8m0_rule(sf2.data<float>()[j * 4 + m]));
    EXPECT_EQ(byte_of(w0, 3), 0);
    for (int j = 0; j < 2; ++j) EXPECT_EQ(byte_of(w1, j), ue8m0_rule(sf2.data<float>()[(3 + j) * 4 + m]));
    EXPECT_EQ(byte_of(w1, 2), 0);
    EXPECT_EQ(byte_of(w1, 3), 0);
  }
}

TEST(Ue8m0Pack, InvalidInputsRejected) {
  Tensor sf = Tensor::zeros({7, 6}, DType::F32);
  Tensor out = Tensor::empty({2, 7}, DType::I32);
  std::string m = test::error_of([&] { pack_mn(sf, out); });
  EXPECT_NE(m.find("must be [2, 8], got [2, 7]"), std::string::npos) << m;
  Tensor out16 = Tensor::empty({2, 8}, DType::I16);
  m = test::error_of([&] { pack_mn(sf, out16); });
  EXPECT_NE(m.find("out must be i32, got i16"), std::string::npos) << m;
  Tensor sfb = Tensor::zeros({7, 6}, DType::BF16), out8 = Tensor::empty({2, 8}, DType::I32);
  m = test::error_of([&] { pack_mn(sfb, out8); });
  EXPECT_NE(m.find("sf must be f32 scales or ue8m0"), std::string::npos) << m;
  Tensor sfk = Tensor::zeros({5, 4}, DType::F32), outk = Tensor::empty({2, 4}, DType::I32);
  m = test::error_of([&] { pack_kg(sfk, {256, 256}, 128, outk); });
  EXPECT_NE(m.find("sf has 5 rows but ks (gran_k 128) needs sum ceil(ks/gran_k) = 4"), std::string::npos) << m;
  m = test::error_of([&] { pack_kg(sfk, {256, -1}, 128, outk); });
  EXPECT_NE(m.find("ks[1] = -1 is negative"), std::string::npos) << m;
  m = test::error_of([&] { pack_kg(sfk, {640}, 0, outk); });
  EXPECT_NE(m.find("gran_k must be positive, got 0"), std::string::npos) << m;
}

TEST(Ue8m0PackCuda, AllLayoutsMatchCpu) {
  DSA_REQUIRE_CUDA();
  Rng rng;
  auto gpu_poisoned = [](const Shape& s) {
    Tensor t = Tensor::empty(s, DType::I32, Device::cuda());
    test::poison(t);
    return t;
  };
  // K-major packing.
  for (const Shape& s : {Shape{37, 11}, Shape{3, 5, 8}, Shape{1000}}) {
    Tensor sf = random_scales(s, rng);
    Shape os = s;
    os.back() = (os.back() + 3) / 4;
    Tensor out_cpu = Tensor::empty(os, DType::I32), out_gpu = gpu_poisoned(os);
    Ue8m0PackParams p;
    p.sf = sf;
    p.out = out_cpu;
    pack_ue8m0(p);
    p.sf = sf.to(Device::cuda());
    p.out = out_gpu;
    pack_ue8m0(p);
    EXPECT_EQ(test::host_bytes(out_cpu), test::host_bytes(out_gpu)) << shape_str(s);
  }
  // MN-major, f32 (non-power-of-two scales included) and ue8m0 input.
  for (const Shape& s : {Shape{4, 4097, 56}, Shape{1, 130, 7}, Shape{6, 3}, Shape{2, 256, 13}}) {
    for (DType dt : {DType::F32, DType::E8M0}) {
      Tensor sf = dt == DType::F32 ? random_scales(s, rng) : test::random_bytes(s, DType::E8M0, rng);
      const Shape os = mn_major_packed_shape(s);
      Tensor out_cpu = Tensor::empty(os, DType::I32), out_gpu = gpu_poisoned(os);
      pack_mn(sf, out_cpu);
      pack_mn(sf.to(Device::cuda()), out_gpu);
      EXPECT_EQ(test::host_bytes(out_cpu), test::host_bytes(out_gpu)) << shape_str(s) << " " << dtype_name(dt);
    }
  }
  // K-grouped, several groups incl. empty and partial ones, mn not a multiple of 4.
  for (int64_t mn : {int64_t{4}, int64_t{7}, int64_t{2050}}) {
    std::vector<int64_t> ks;
    for (int g = 0; g < 9; ++g) ks.push_back(rng.randint(0, 3000));
    ks[3] = 0;
    for (int gran : {32, 128}) {
      Tensor sf = random_scales({k_grouped_sf_rows(ks, gran), mn}, rng);
      const Shape os = k_grouped_packed_shape(ks, gran, mn);
      Tensor out_cpu = Tensor::empty(os, DType::I32), out_gpu = gpu_poisoned(os);
      pack_kg(sf, ks, gran, out_cpu);
      pack_kg(sf.to(Device::cuda()), ks, gran, out_gpu);
      EXPECT_EQ(test::host_bytes(out_cpu), test::host_bytes(out_gpu)) << "mn " << mn << " gran " << gran;
    }
  }
}
