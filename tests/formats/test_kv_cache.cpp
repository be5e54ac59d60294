// KV-cache formats (kv_cache_ops.h): byte layouts checked against offsets written out here,
// quantization round trips within the e4m3 error bound, skipped and invalid slots, and CUDA vs CPU
// byte equality.
#include <cmath>
#include <cstring>
#include <set>

#include "dsa/core/dtype_conv.h"
#include "dsa/formats/kv_cache_ops.h"
#include "util.h"

using namespace dsa;
using namespace dsa::formats;
using dsa::test::Rng;

namespace {

constexpr uint8_t kPattern = 0xA5;

double pow2_ceil(double x) { return std::exp2(std::ceil(std::log2(x))); }

// Expected e4m3 group scale of the reference quantizer, computed independently of quant_math.h.
float expected_scale(const uint16_t* v, int n, bool pow2) {
  float amax = 0.f;
  for (int i = 0; i < n; ++i) amax = std::max(amax, std::fabs(bf16_bits_to_f32(v[i])));
  const float q = std::max(amax, 1e-4f) / 448.f;
  return pow2 ? static_cast<float>(pow2_ceil(q)) : q;
}

// Page bytes written out per format (not via kv_layout.h).
size_t page_bytes_ref(KvFormat f, int P) {
  switch (f) {
    case KvFormat::DsMla: return size_t(P) * 656;
    case KvFormat::Model1: return (size_t(P) * 584 + 575) / 576 * 576;
    case KvFormat::Indexer: return size_t(P) * 132;
  }
  return 0;
}

struct Region {
  size_t begin, end;
};
// Byte ranges owned by a slot (for Model1 the token at position 0 also owns the page tail).
std::vector<Region> slot_regions(KvFormat f, int64_t slot, int P) {
  const size_t page = size_t(slot / P) * page_bytes_ref(f, P), pos = size_t(slot % P);
  switch (f) {
    case KvFormat::DsMla: return {{size_t(slot) * 656, size_t(slot) * 656 + 656}};
    case KvFormat::Model1: {
      std::vector<Region> r = {{page + pos * 576, page + pos * 576 + 576},
                               {page + size_t(P) * 576 + pos * 8, page + size_t(P) * 576 + pos * 8 + 8}};
      if (pos == 0) r.push_back({page + size_t(P) * 584, page + page_bytes_ref(f, P)});
      return r;
    }
    case KvFormat::Indexer:
      return {{page + pos * 128, page + pos * 128 + 128}, {page + size_t(P) * 128 + pos * 4, page + size_t(P) * 128 + pos * 4 + 4}};
  }
  return {};
}

// Per format: group size, number of quantized values, rope count.
struct Geometry {
  int group, nope, rope;
};
Geometry geometry(KvFormat f) {
  switch (f) {
    case KvFormat::DsMla: return {128, 512, 64};
    case KvFormat::Model1: return {64, 448, 64};
    case KvFormat::Indexer: return {128, 128, 0};
  }
  return {};
}

Tensor make_cache(KvFormat f, int P, int64_t pages, uint8_t fill) {
  Tensor c = Tensor::empty({pages, static_cast<int64_t>(page_bytes_ref(f, P))}, DType::U8);
  c.fill_bytes(fill);
  return c;
}

void insert(KvFormat f, int P, Tensor& cache, const Tensor& kv, const Tensor& slots,
            ScaleRounding r = ScaleRounding::Pow2Ceil) {
  KvInsertParams p;
  p.format = f;
  p.page_size = P;
  p.cache = cache;
  p.kv = kv;
  p.slots = slots;
  p.rounding = r;
  kv_insert(p);
}

void gather(KvFormat f, int P, const Tensor& cache, const Tensor& slots, Tensor& out) {
  KvGatherParams p;
  p.format = f;
  p.page_size = P;
  p.cache = cache;
  p.slots = slots;
  p.out = out;
  kv_gather(p);
}

// Inserts random rows at scattered slots (some -1) across partially filled pages, then checks:
// bytes of every other slot untouched, stored scales equal the reference rule, gather round trip
// within the e4m3 bound, rope exact, -1 rows zero, bf16 gather = bf16 rounding of the f32 gather.
void round_trip(KvFormat f, int P, int64_t pages, int64_t rows, int64_t skips, ScaleRounding rounding) {
  SCOPED_TRACE(std::string(kv_format_name(f)) + " page_size " + std::to_string(P));
  Rng rng;
  const Geometry geo = geometry(f);
  const int dim = kv_row_dim(f);
  Tensor cache = make_cache(f, P, pages, kPattern);
  Tensor kv = test::random_grouped_bf16(rng, rows, dim, geo.group);
  auto slots = test::random_slots(rng, rows, pages * P, skips);
  insert(f, P, cache, kv, test::i64_tensor(slots), rounding);
  const bool pow2 = rounding == ScaleRounding::Pow2Ceil;

  // Untouched bytes: everything not owned by an inserted slot still holds the pattern.
  std::vector<bool> owned(cache.nbytes(), false);
  for (int64_t s : slots)
    if (s >= 0)
      for (Region r : slot_regions(f, s, P))
        for (size_t i = r.begin; i < r.end; ++i) owned[i] = true;
  const auto* bytes = cache.data<uint8_t>();
  int64_t touched_outside = 0;
  for (size_t i = 0; i < cache.nbytes(); ++i) touched_outside += !owned[i] && bytes[i] != kPattern;
  EXPECT_EQ(touched_outside, 0);

  // Stored scales and pad bytes at their offsets.
  for (int64_t r = 0; r < rows; ++r) {
    if (slots[r] < 0) continue;
    const uint16_t* x = kv.data<uint16_t>() + r * dim;
    const size_t page = size_t(slots[r] / P) * page_bytes_ref(f, P), pos = size_t(slots[r] % P);
    for (int g = 0; g < geo.nope / geo.group; ++g) {
      const float want = expected_scale(x + g * geo.group, geo.group, pow2);
      float got = 0.f;
      if (f == KvFormat::DsMla) std::memcpy(&got, bytes + slots[r] * 656 + 512 + 4 * g, 4);
      if (f == KvFormat::Indexer) std::memcpy(&got, bytes + page + size_t(P) * 128 + pos * 4, 4);
      if (f == KvFormat::Model1) got = ue8m0_to_f32(bytes[page + size_t(P) * 576 + pos * 8 + g]);
      ASSERT_EQ(got, want) << "row " << r << " group " << g;
    }
    if (f == KvFormat::Model1) {
      ASSERT_EQ(bytes[page + size_t(P) * 576 + pos * 8 + 7], 0) << "footer pad byte of row " << r;
      if (pos == 0) {
        for (size_t i = page + size_t(P) * 584; i < page + page_bytes_ref(f, P); ++i) ASSERT_EQ(bytes[i], 0);
      }
    }
  }

  // Gather the same slots back (plus the -1 rows).
  Tensor out = Tensor::empty({rows, dim}, DType::F32), out16 = Tensor::empty({rows, dim}, DType::BF16);
  test::poison(out);
  test::poison(out16);
  gather(f, P, cache, test::i64_tensor(slots), out);
  gather(f, P, cache, test::i64_tensor(slots), out16);
  int64_t bad = 0;
  for (int64_t r = 0; r < rows; ++r) {
    const uint16_t* x = kv.data<uint16_t>() + r * dim;
    const float* o = out.data<float>() + r * dim;
    const uint16_t* o16 = out16.data<uint16_t>() + r * dim;
    for (int i = 0; i < dim; ++i) {
      ASSERT_FALSE(std::isnan(o[i])) << "row " << r << " col " << i;
      ASSERT_EQ(o16[i], f32_to_bf16_bits(o[i])) << "row " << r << " col " << i;
      const float want = bf16_bits_to_f32(x[i]);
      if (slots[r] < 0) {
        bad += o[i] != 0.f;
      } else if (i >= geo.nope) {
        bad += o[i] != want;  // rope stored as is
      } else {
        const float scale = expected_scale(x + (i / geo.group) * geo.group, geo.group, pow2);
        if (!test::within_e4m3(o[i], want, scale)) {
          if (++bad < 5) ADD_FAILURE() << "row " << r << " col " << i << ": " << o[i] << " vs " << want;
        }
      }
    }
  }
  EXPECT_EQ(bad, 0);
}

const KvFormat kFormats[] = {KvFormat::DsMla, KvFormat::Model1, KvFormat::Indexer};

}  // namespace

TEST(KvCache, PageBytesAndRowDims) {
  EXPECT_EQ(kv_page_bytes(KvFormat::DsMla, 64), 64u * 656);
  EXPECT_EQ(kv_page_bytes(KvFormat::Model1, 64), 37440u);    // 64*584 = 37376 -> 65*576
  EXPECT_EQ(kv_page_bytes(KvFormat::Model1, 256), 149760u);  // 256*584 = 149504 -> 260*576
  EXPECT_EQ(kv_page_bytes(KvFormat::Model1, 2), 1728u);      // 2*584 = 1168 -> 3*576
  EXPECT_EQ(kv_page_bytes(KvFormat::Indexer, 64), 64u * 132);
  EXPECT_EQ(kv_row_dim(KvFormat::DsMla), 576);
  EXPECT_EQ(kv_row_dim(KvFormat::Model1), 512);
  EXPECT_EQ(kv_row_dim(KvFormat::Indexer), 128);
}

TEST(KvCache, DsMlaTokenByteLayout) {
  Rng rng;
  Tensor cache = make_cache(KvFormat::DsMla, 64, 3, kPattern);
  Tensor kv = test::random_grouped_bf16(rng, 1, 576, 128);
  insert(KvFormat::DsMla, 64, cache, kv, test::i64_tensor({70}));
  const uint8_t* t = cache.data<uint8_t>() + 70 * 656;
  const uint16_t* x = kv.data<uint16_t>();
  for (int g = 0; g < 4; ++g) {
    float s;
    std::memcpy(&s, t + 512 + 4 * g, 4);
    EXPECT_EQ(s, expected_scale(x + 128 * g, 128, true)) << "scale " << g << " at byte " << 512 + 4 * g;
    for (int i = 0; i < 128; ++i)
      ASSERT_EQ(t[128 * g + i], f32_to_e4m3(bf16_bits_to_f32(x[128 * g + i]) / s)) << "latent " << 128 * g + i;
  }
  EXPECT_EQ(std::memcmp(t + 528, x + 512, 128), 0) << "rope bytes [528, 656)";
  for (size_t i = 0; i < cache.nbytes(); ++i)
    if (i < 70 * 656 || i >= 71 * 656) {
      ASSERT_EQ(cache.data<uint8_t>()[i], kPattern) << "byte " << i;
    }
}

TEST(KvCache, Model1PageLayoutAllPageSizes) {
  for (int P : {2, 64, 256}) {
    SCOPED_TRACE("page_size " + std::to_string(P));
    Rng rng;
    const size_t pb = page_bytes_ref(KvFormat::Model1, P);
    Tensor cache = make_cache(KvFormat::Model1, P, 3, kPattern);
    Tensor kv = test::random_grouped_bf16(rng, 2, 512, 64);
    insert(KvFormat::Model1, P, cache, kv, test::i64_tensor({P + 1, P}));  // page 1, positions 1 and 0
    const uint8_t* b = cache.data<uint8_t>();
    for (int row = 0; row < 2; ++row) {
      const size_t pos = row == 0 ? 1 : 0;
      const uint8_t* data = b + pb + pos * 576;
      const uint8_t* foot = b + pb + size_t(P) * 576 + pos * 8;
      const uint16_t* x = kv.data<uint16_t>() + row * 512;
      for (int g = 0; g < 7; ++g) {
        const float s = expected_scale(x + 64 * g, 64, true);
        ASSERT_EQ(ue8m0_to_f32(foot[g]), s) << "scale byte " << g;
        for (int i = 0; i < 64; ++i)
          ASSERT_EQ(data[64 * g + i], f32_to_e4m3(bf16_bits_to_f32(x[64 * g + i]) / s)) << "nope " << 64 * g + i;
      }
      EXPECT_EQ(foot[7], 0) << "footer pad byte";
      EXPECT_EQ(std::memcmp(data + 448, x + 448, 128), 0) << "rope bytes [448, 576)";
    }
    for (size_t i = pb + size_t(P) * 584; i < 2 * pb; ++i) ASSERT_EQ(b[i], 0) << "page tail padding byte " << i;
    for (size_t i = 0; i < pb; ++i) ASSERT_EQ(b[i], kPattern) << "page 0 byte " << i;
    for (size_t i = 2 * pb; i < 3 * pb; ++i) ASSERT_EQ(b[i], kPattern) << "page 2 byte " << i;
  }
}

TEST(KvCache, IndexerEntryLayout) {
  Rng rng;
  Tensor cache = make_cache(KvFormat::Indexer, 64, 2, kPattern);
  Tensor kv = test::random_grouped_bf16(rng, 1, 128, 128);
  insert(KvFormat::Indexer, 64, cache, kv, test::i64_tensor({65}));
  const uint8_t* b = cache.data<uint8_t>();
  const size_t pb = 64 * 132;
  float s;
  std::memcpy(&s, b + pb + 64 * 128 + 4, 4);
  EXPECT_EQ(s, expected_scale(kv.data<uint16_t>(), 128, true));
  for (int i = 0; i < 128; ++i)
    ASSERT_EQ(b[pb + 128 + i], f32_to_e4m3(bf16_bits_to_f32(kv.data<uint16_t>()[i]) / s)) << "key byte " << i;
}

TEST(KvCache, RoundTripScatteredPartialPages) {
  round_trip(KvFormat::DsMla, 64, 5, 150, 20, ScaleRounding::Pow2Ceil);
  round_trip(KvFormat::Model1, 64, 5, 150, 20, ScaleRounding::Pow2Ceil);
  round_trip(KvFormat::Model1, 256, 2, 300, 31, ScaleRounding::Pow2Ceil);
  round_trip(KvFormat::Model1, 2, 40, 50, 7, ScaleRounding::Pow2Ceil);
  round_trip(KvFormat::Indexer, 64, 4, 150, 20, ScaleRounding::Pow2Ceil);
  round_trip(KvFormat::Indexer, 1, 90, 60, 5, ScaleRounding::Pow2Ceil);
}

TEST(KvCache, RoundTripExactFp32Scales) {
  round_trip(KvFormat::DsMla, 64, 3, 100, 10, ScaleRounding::Exact);
  round_trip(KvFormat::Indexer, 64, 3, 100, 10, ScaleRounding::Exact);
}

TEST(KvCache, ZeroGroupGetsTinyFiniteScale) {
  const float tiny = std::ldexp(1.f, -22);  // ceil_pow2(1e-4 / 448)
  Tensor kv = Tensor::zeros({1, 576}, DType::BF16);
  Tensor cache = make_cache(KvFormat::DsMla, 64, 1, kPattern);
  insert(KvFormat::DsMla, 64, cache, kv, test::i64_tensor({3}));
  for (int g = 0; g < 4; ++g) {
    float s;
    std::memcpy(&s, cache.data<uint8_t>() + 3 * 656 + 512 + 4 * g, 4);
    EXPECT_EQ(s, tiny);
  }
  for (int i = 0; i < 512; ++i) ASSERT_EQ(cache.data<uint8_t>()[3 * 656 + i], 0);

  Tensor kv1 = Tensor::zeros({1, 512}, DType::BF16);
  Tensor c1 = make_cache(KvFormat::Model1, 64, 1, kPattern);
  insert(KvFormat::Model1, 64, c1, kv1, test::i64_tensor({0}));
  for (int g = 0; g < 7; ++g) EXPECT_EQ(c1.data<uint8_t>()[64 * 576 + g], 127 - 22);
  Tensor out = Tensor::empty({1, 512}, DType::F32);
  test::poison(out);
  gather(KvFormat::Model1, 64, c1, test::i64_tensor({0}), out);
  for (int i = 0; i < 512; ++i) ASSERT_EQ(out.data<float>()[i], 0.f);
}

TEST(KvCache, GatherAcceptsArbitraryFp32Scales) {
  // GLM checkpoints' caches may hold non-power-of-two scales: dequant is e4m3 * scale in fp32.
  Rng rng;
  Tensor cache = test::random_bytes({2, 64 * 656}, DType::U8, rng);
  uint8_t* b = cache.data<uint8_t>();
  const float scales[4] = {0.0123f, 3.7f, 1e-3f, 0.333f};
  for (int t = 0; t < 128; ++t) {
    for (int i = 0; i < 512; ++i)
      if ((b[t * 656 + i] & 0x7F) == 0x7F) b[t * 656 + i] = 0x11;  // no NaN codes
    std::memcpy(b + t * 656 + 512, scales, 16);
    for (int i = 0; i < 64; ++i) {
      const uint16_t v = f32_to_bf16_bits(rng.normal());
      std::memcpy(b + t * 656 + 528 + 2 * i, &v, 2);
    }
  }
  Tensor out = Tensor::empty({3, 576}, DType::F32);
  test::poison(out);
  gather(KvFormat::DsMla, 64, cache, test::i64_tensor({100, -1, 7}), out);
  const int64_t slot[3] = {100, -1, 7};
  for (int r = 0; r < 3; ++r)
    for (int i = 0; i < 576; ++i) {
      float want = 0.f;
      if (slot[r] >= 0) {
        const uint8_t* t = b + slot[r] * 656;
        if (i < 512) {
          want = e4m3_to_f32(t[i]) * scales[i / 128];
        } else {
          uint16_t v;
          std::memcpy(&v, t + 528 + 2 * (i - 512), 2);
          want = bf16_bits_to_f32(v);
        }
      }
      ASSERT_EQ(out.data<float>()[r * 576 + i], want) << "row " << r << " col " << i;
    }
}

TEST(KvCache, InvalidInputsRejectedWithoutWriting) {
  Rng rng;
  Tensor cache = make_cache(KvFormat::DsMla, 64, 2, kPattern);
  Tensor kv = test::random_grouped_bf16(rng, 3, 576, 128);
  KvInsertParams p;
  p.format = KvFormat::DsMla;
  p.page_size = 64;
  p.cache = cache;
  p.kv = kv;
  p.slots = test::i64_tensor({3, 128, 5});  // 128 = one past the last slot
  std::string m = test::error_of([&] { kv_insert(p); });
  EXPECT_NE(m.find("slots[1] = 128"), std::string::npos) << m;
  EXPECT_NE(m.find("[0, 128)"), std::string::npos) << m;
  for (size_t i = 0; i < cache.nbytes(); ++i) ASSERT_EQ(cache.data<uint8_t>()[i], kPattern) << "byte " << i;

  p.slots = test::i64_tensor({3, -2, 5});
  m = test::error_of([&] { kv_insert(p); });
  EXPECT_NE(m.find("slots[1] = -2"), std::string::npos) << m;

  p.slots = test::i64_tensor({3, 4});
  m = test::error_of([&] { kv_insert(p); });
  EXPECT_NE(m.find("3 rows but slots has 2"), std::string::npos) << m;

  p.slots = test::i64_tensor({1, 2, 3});
  p.kv = Tensor::zeros({3, 512}, DType::BF16);
  m = test::error_of([&] { kv_insert(p); });
  EXPECT_NE(m.find("[N][576]"), std::string::npos) << m;

  p.kv = Tensor::zeros({3, 576}, DType::F32);
  m = test::error_of([&] { kv_insert(p); });
  EXPECT_NE(m.find("kv must be bf16, got f32"), std::string::npos) << m;

  p.kv = kv;
  p.page_size = 0;
  m = test::error_of([&] { kv_insert(p); });
  EXPECT_NE(m.find("page_size"), std::string::npos) << m;

  p.page_size = 64;
  p.cache = cache.reshape({-1}).slice(0, 0, 64 * 656 + 10);
  m = test::error_of([&] { kv_insert(p); });
  EXPECT_NE(m.find("not a whole number of pages"), std::string::npos) << m;

  p.cache = cache;
  p.slots = test::i64_tensor({1, 2, 3}).view_as(DType::F64);
  m = test::error_of([&] { kv_insert(p); });
  EXPECT_NE(m.find("slots must be i64"), std::string::npos) << m;

  KvInsertParams q;
  q.format = KvFormat::Model1;
  q.page_size = 64;
  q.cache = make_cache(KvFormat::Model1, 64, 1, 0);
  q.kv = Tensor::zeros({1, 512}, DType::BF16);
  q.slots = test::i64_tensor({0});
  q.rounding = ScaleRounding::Exact;
  m = test::error_of([&] { kv_insert(q); });
  EXPECT_NE(m.find("rounding must be Pow2Ceil"), std::string::npos) << m;

  KvGatherParams g;
  g.format = KvFormat::Indexer;
  g.page_size = 64;
  g.cache = make_cache(KvFormat::Indexer, 64, 1, 0);
  g.slots = test::i64_tensor({0, 64});
  g.out = Tensor::empty({2, 128}, DType::F32);
  m = test::error_of([&] { kv_gather(g); });
  EXPECT_NE(m.find("slots[1] = 64"), std::string::npos) << m;
  g.slots = test::i64_tensor({0, 1});
  g.out = Tensor::empty({2, 128}, DType::I32);
  m = test::error_of([&] { kv_gather(g); });
  EXPECT_NE(m.find("out must be f32 or bf16, got i32"), std::string::npos) << m;
  g.out = Tensor::empty({2, 576}, DType::F32);
  m = test::error_of([&] { kv_gather(g); });
  EXPECT_NE(m.find("[M][128]"), std::string::npos) << m;
}

// ---- CUDA vs CPU ------------------------------------------------------------------------------
namespace {

// Same random cache pattern, rows (strided: a slice of wider rows) and slots on both sides; the
// whole cache must match byte for byte, then gathers (f32 and bf16) must match bit for bit.
void cuda_matches_cpu(KvFormat f, int P, int64_t pages, int64_t rows, int64_t skips, ScaleRounding r) {
  SCOPED_TRACE(std::string(kv_format_name(f)) + " page_size " + std::to_string(P));
  Rng rng;
  const int dim = kv_row_dim(f);
  Tensor wide = test::random_grouped_bf16(rng, rows, dim + 24, geometry(f).group);
  Tensor kv_cpu = wide.slice(1, 8, 8 + dim);
  Tensor kv_gpu = wide.to(Device::cuda()).slice(1, 8, 8 + dim);
  Tensor cache_cpu = test::random_bytes({pages, static_cast<int64_t>(kv_page_bytes(f, P))}, DType::U8, rng);
  Tensor cache_gpu = cache_cpu.to(Device::cuda());
  const auto slots = test::random_slots(rng, rows, pages * P, skips);
  insert(f, P, cache_cpu, kv_cpu, test::i64_tensor(slots), r);
  insert(f, P, cache_gpu, kv_gpu, test::i64_tensor(slots, Device::cuda()), r);
  const auto a = test::host_bytes(cache_cpu), b = test::host_bytes(cache_gpu);
  size_t diff = 0, first = 0;
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i] != b[i] && diff++ == 0) first = i;
  EXPECT_EQ(diff, 0u) << "first differing cache byte " << first;

  // Gather inserted slots in random order with repeats and -1 entries.
  std::vector<int64_t> g;
  for (int64_t i = 0; i < rows + 17; ++i) {
    const int64_t s = slots[rng.randint(0, rows - 1)];
    g.push_back(rng.uniform() < 0.1f ? -1 : s);
  }
  for (DType dt : {DType::F32, DType::BF16}) {
    Tensor out_cpu = Tensor::empty({static_cast<int64_t>(g.size()), dim}, dt);
    Tensor out_gpu = Tensor::empty({static_cast<int64_t>(g.size()), dim}, dt, Device::cuda());
    test::poison(out_cpu);
    test::poison(out_gpu);
    gather(f, P, cache_cpu, test::i64_tensor(g), out_cpu);
    gather(f, P, cache_gpu, test::i64_tensor(g, Device::cuda()), out_gpu);
    const auto x = test::host_bytes(out_cpu), y = test::host_bytes(out_gpu);
    EXPECT_EQ(x, y) << "gather " << dtype_name(dt);
    if (dt == DType::F32) {
      const float* v = reinterpret_cast<const float*>(y.data());
      for (size_t i = 0; i < y.size() / 4; ++i) ASSERT_FALSE(std::isnan(v[i])) << "element " << i;
    }
  }
}

}  // namespace

TEST(KvCacheCuda, InsertAndGatherMatchCpuByteExact) {
  DSA_REQUIRE_CUDA();
  cuda_matches_cpu(KvFormat::DsMla, 64, 7, 300, 25, ScaleRounding::Pow2Ceil);
  cuda_matches_cpu(KvFormat::DsMla, 64, 3, 100, 9, ScaleRounding::Exact);
  cuda_matches_cpu(KvFormat::Model1, 64, 6, 300, 25, ScaleRounding::Pow2Ceil);
  cuda_matches_cpu(KvFormat::Model1, 256, 3, 500, 40, ScaleRounding::Pow2Ceil);
  cuda_matches_cpu(KvFormat::Model1, 2, 200, 300, 30, ScaleRounding::Pow2Ceil);
  cuda_matches_cpu(KvFormat::Indexer, 64, 6, 300, 25, ScaleRounding::Pow2Ceil);
  cuda_matches_cpu(KvFormat::Indexer, 64, 3, 100, 9, ScaleRounding::Exact);
}

TEST(KvCacheCuda, OutOfRangeSlotsNeverWrite) {
  DSA_REQUIRE_CUDA();
  // The GPU path skips slots outside the cache (it cannot throw without a host sync): the cache
  // must equal the CPU result with those slots replaced by -1, and gathers give zero rows.
  Rng rng;
  for (KvFormat f : kFormats) {
    SCOPED_TRACE(std::string(kv_format_name(f)));
    const int P = 64, dim = kv_row_dim(f);
    Tensor kv = test::random_grouped_bf16(rng, 6, dim, geometry(f).group);
    Tensor cache_cpu = test::random_bytes({2, static_cast<int64_t>(kv_page_bytes(f, P))}, DType::U8, rng);
    Tensor cache_gpu = cache_cpu.to(Device::cuda());
    const std::vector<int64_t> bad = {5, 128, -7, 1000000000, 127, int64_t(1) << 40};
    const std::vector<int64_t> cleaned = {5, -1, -1, -1, 127, -1};
    insert(f, P, cache_cpu, kv, test::i64_tensor(cleaned));
    insert(f, P, cache_gpu, kv.to(Device::cuda()), test::i64_tensor(bad, Device::cuda()));
    EXPECT_EQ(test::host_bytes(cache_cpu), test::host_bytes(cache_gpu));
    Tensor out_cpu = Tensor::empty({6, dim}, DType::F32), out_gpu = Tensor::empty({6, dim}, DType::F32, Device::cuda());
    test::poison(out_cpu);
    test::poison(out_gpu);
    gather(f, P, cache_cpu, test::i64_tensor(cleaned), out_cpu);
    gather(f, P, cache_gpu, test::i64_tensor(bad, Device::cuda()), out_gpu);
    EXPECT_EQ(test::host_bytes(out_cpu), test::host_bytes(out_gpu));
  }
}
