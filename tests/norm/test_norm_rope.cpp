// The fused norm + RoPE ops (ops/norm/norm_rope.h) against the op sequences they replace in the
// DeepSeek-V4 attention: rms_norm (f32 out) -> apply_rope -> cast bf16 [-> zero-padded heads]
// [-> kv_insert MODEL1]. CPU: bit-exact with the old CPU sequence (the same double arithmetic,
// the same roundings). CUDA: bit-exact with the old CUDA sequence (same reduction layout, same
// rotation helper), within one bf16 ulp (8e-3 relative, 8e-3 absolute for values cancelled by
// the rotation) of the CPU reference; MODEL1 cache bytes exact. Fixed seeds (printed), outputs
// poisoned with NaN (0xFF) so every element must be written.
#include <cstdio>
#include <cstring>

#include "common/op_helpers.h"
#include "dsa/formats/kv_cache_ops.h"
#include "dsa/ops/norm/norm.h"
#include "dsa/ops/norm/norm_rope.h"
#include "dsa/ops/rope/rope.h"
#include "dsa/ops/tensor/tensor_ops.h"

using namespace dsa;
using namespace dsa::ops;
using namespace dsa::test;

namespace {

Rng seeded(uint64_t seed, const char* what) {
  std::printf("[seed] %s %llu\n", what, static_cast<unsigned long long>(seed));
  return Rng(seed);
}

Tensor positions(Rng& rng, int64_t T, DType dt, Device dev = Device::cpu()) {
  Tensor p = Tensor::empty({T}, dt);
  for (int64_t t = 0; t < T; ++t) {
    const int64_t v = t == 0 ? 0 : rng.randint(0, 300000);  // position 0 (identity rotation) included
    if (dt == DType::I64)
      p.data<int64_t>()[t] = v;
    else
      p.data<int32_t>()[t] = static_cast<int32_t>(v);
  }
  return p.to(dev);
}

NormRopeParams v4_params(int ratio, int64_t D = 512) {
  NormRopeParams p;
  p.norm.eps = 1e-6f;
  p.rope = ratio == 0 ? RopeConfig::v4_main() : RopeConfig::v4_compress();
  p.rope_offset = D - p.rope.rope_dim;
  return p;
}

// The old sequence on x's device: rms_norm into f32, apply_rope in place, then bf16 into heads
// [0, H) of a zero-filled [T][Hp][D] (V4's attention before the fusion; Hp == H: a plain cast).
Tensor old_sequence(const Tensor& x, const Tensor& w, const Tensor& pos, int64_t Hp, const NormRopeParams& p) {
  const int64_t T = x.size(0), H = x.dim() == 3 ? x.size(1) : 1, D = x.size(x.dim() - 1);
  Tensor f = Tensor::empty({T, H, D}, DType::F32, x.device());
  rms_norm(x.dim() == 3 ? x : x.reshape({T, 1, D}), w, f, p.norm);
  apply_rope(f, pos, p.rope, {.offset = p.rope_offset});
  if (Hp == H) return cast(f, DType::BF16);
  Tensor out = Tensor::zeros({T, Hp, D}, DType::BF16, x.device());
  copy_cast(out.slice(1, 0, H), f);
  return out;
}

std::vector<uint16_t> bits(const Tensor& t) {
  Tensor c = t.to(Device::cpu()).contiguous();
  std::vector<uint16_t> v(static_cast<size_t>(c.numel()));
  std::memcpy(v.data(), c.raw(), v.size() * 2);
  return v;
}

std::vector<uint8_t> bytes(const Tensor& t) {
  Tensor c = t.to(Device::cpu());
  std::vector<uint8_t> v(c.nbytes());
  std::memcpy(v.data(), c.raw(), v.size());
  return v;
}

void expect_same_bits(const Tensor& a, const Tensor& b, const std::string& what) {
  const std::vector<uint16_t> x = bits(a), y = bits(b);
  ASSERT_EQ(x.size(), y.size()) << what;
  for (size_t i = 0; i < x.size(); ++i) ASSERT_EQ(x[i], y[i]) << what << ": element " << i;
}

void expect_zero_heads(const Tensor& out, int64_t H, const std::string& what) {
  const std::vector<uint16_t> v = bits(out);
  const int64_t T = out.size(0), Hp = out.size(1), D = out.size(2);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t h = H; h < Hp; ++h)
      for (int64_t i = 0; i < D; ++i) ASSERT_EQ(v[static_cast<size_t>((t * Hp + h) * D + i)], 0) << what;
}

struct QCase {
  int64_t T, H, Hp, D, pad;  // x = columns [0, D) of rows of D + pad (a strided view)
  DType xdt, wdt, pdt;
  bool weighted;
  int ratio;
};

const QCase kQCases[] = {
    {1, 64, 64, 512, 0, DType::BF16, DType::BF16, DType::I64, false, 0},  // V4-Flash decode, batch 1
    {5, 3, 16, 512, 0, DType::BF16, DType::BF16, DType::I64, false, 4},   // padded heads, odd T, odd H
    {7, 1, 1, 512, 4, DType::F32, DType::F32, DType::I32, true, 128},     // kv-like, strided rows
    {3, 5, 8, 130, 2, DType::BF16, DType::F32, DType::I32, true, 0},      // D % 4 != 0: scalar accesses
    {2, 2, 3, 1536, 0, DType::F32, DType::BF16, DType::I64, true, 4},     // 2 groups per thread
    {1, 1, 2, 6144, 0, DType::BF16, DType::BF16, DType::I64, false, 0},   // 4 groups per thread
    {33, 7, 7, 64, 0, DType::BF16, DType::BF16, DType::I64, false, 0},    // rope over the whole head
};

Tensor q_input(const QCase& c, Rng& rng) {
  Tensor full = random_act({c.T, c.H, c.D + c.pad}, c.xdt, rng, 3.f);
  return full.slice(2, 0, c.D);
}

std::string q_name(const QCase& c) {
  return fmt::format("T={} H={} Hp={} D={} pad={} x={} w={}", c.T, c.H, c.Hp, c.D, c.pad, dtype_name(c.xdt),
                     c.weighted ? dtype_name(c.wdt) : "none");
}

// ---- MODEL1 cache helpers ----

constexpr uint8_t kPattern = 0xA5;  // bytes a row does not own must keep it

Tensor make_cache(int page_size, int64_t pages, Device dev = Device::cpu()) {
  Tensor c = Tensor::empty({static_cast<int64_t>(formats::kv_page_bytes(formats::KvFormat::Model1, page_size) * pages)},
                           DType::U8);
  c.fill_bytes(kPattern);
  return c.to(dev);
}

// T slots: distinct valid ones (some at page position 0) and every third -1.
Tensor make_slots(Rng& rng, int64_t T, int64_t num_slots) {
  Tensor s = Tensor::empty({T}, DType::I64);
  std::vector<int64_t> all(static_cast<size_t>(num_slots));
  for (int64_t i = 0; i < num_slots; ++i) all[static_cast<size_t>(i)] = i;
  for (int64_t i = num_slots - 1; i > 0; --i) std::swap(all[static_cast<size_t>(i)], all[static_cast<size_t>(rng.randint(0, i))]);
  for (int64_t t = 0; t < T; ++t) s.data<int64_t>()[t] = t % 3 == 2 ? -1 : all[static_cast<size_t>(t)];
  return s;
}

void old_model1(const Tensor& x, const Tensor& w, const Tensor& pos, const Tensor& cache, int P, const Tensor& slots,
                const NormRopeParams& p) {
  const Tensor kv = old_sequence(x, w, pos, 1, p).reshape({x.size(0), x.size(1)});
  formats::kv_insert({.format = formats::KvFormat::Model1, .page_size = P, .cache = cache, .kv = kv, .slots = slots});
}

struct M1Case {
  int64_t T;
  int P;
  int64_t pages;
  DType xdt;
  int ratio;
};
const M1Case kM1Cases[] = {{1, 64, 1, DType::BF16, 0}, {37, 64, 2, DType::BF16, 4}, {9, 2, 8, DType::F32, 128},
                           {4, 256, 1, DType::BF16, 0}};

}  // namespace

// ---- CPU ----------------------------------------------------------------------------------------

TEST(NormRope, CpuEqualsOldSequenceBitForBit) {
  Rng rng = seeded(1201, "NormRope.CpuEqualsOldSequenceBitForBit");
  for (const QCase& c : kQCases) {
    const NormRopeParams p = v4_params(c.ratio, c.D);
    const Tensor x = q_input(c, rng);
    const Tensor w = c.weighted ? random_act({c.D}, c.wdt, rng) : Tensor();
    const Tensor pos = positions(rng, c.T, c.pdt);
    Tensor out = Tensor::empty({c.T, c.Hp, c.D}, DType::BF16);
    poison(out);
    rms_norm_rope(x, w, pos, out, p);
    expect_same_bits(out, old_sequence(x, w, pos, c.Hp, p), q_name(c));
    expect_zero_heads(out, c.H, q_name(c));
  }
}

TEST(NormRope, TwoDimensionalInputIsOneHead) {
  Rng rng = seeded(1202, "NormRope.TwoDimensionalInputIsOneHead");
  const NormRopeParams p = v4_params(0);
  const Tensor x = random_bf16({3, 512}, rng), w = random_bf16({512}, rng), pos = positions(rng, 3, DType::I64);
  Tensor a = Tensor::empty({3, 512}, DType::BF16), b = Tensor::empty({3, 1, 512}, DType::BF16);
  poison(a);
  poison(b);
  rms_norm_rope(x, w, pos, a, p);
  rms_norm_rope(x.reshape({3, 1, 512}), w, pos, b, p);
  expect_same_bits(a, b, "2-d vs [T][1][D]");
  expect_same_bits(a, old_sequence(x, w, pos, 1, p).reshape({3, 512}), "2-d vs old");
}

TEST(NormRope, Model1CpuEqualsOldInsertByteForByte) {
  Rng rng = seeded(1203, "NormRope.Model1CpuEqualsOldInsertByteForByte");
  for (const M1Case& c : kM1Cases) {
    const NormRopeParams p = v4_params(c.ratio);
    const Tensor x = random_act({c.T, 512}, c.xdt, rng, 2.f), w = random_bf16({512}, rng);
    const Tensor pos = positions(rng, c.T, DType::I64);
    const Tensor slots = make_slots(rng, c.T, c.pages * c.P);
    Tensor fused = make_cache(c.P, c.pages), old = make_cache(c.P, c.pages);
    Tensor rows = Tensor::empty({c.T, 512}, DType::BF16);
    poison(rows);
    rms_norm_rope_model1(x, w, pos, fused, c.P, slots, rows, p);
    old_model1(x, w, pos, old, c.P, slots, p);
    EXPECT_EQ(bytes(fused), bytes(old)) << "T=" << c.T << " P=" << c.P;
    expect_same_bits(rows, old_sequence(x, w, pos, 1, p).reshape({c.T, 512}), "model1 rows");
    // without the bf16 output: the same cache
    Tensor again = make_cache(c.P, c.pages);
    rms_norm_rope_model1(x, w, pos, again, c.P, slots, Tensor(), p);
    EXPECT_EQ(bytes(again), bytes(old));
  }
}

TEST(NormRope, Validation) {
  Rng rng = seeded(1204, "NormRope.Validation");
  const Tensor x = random_bf16({2, 3, 512}, rng), pos = positions(rng, 2, DType::I64);
  Tensor out = Tensor::empty({2, 4, 512}, DType::BF16);
  NormRopeParams p = v4_params(0);
  p.rope_offset = 447;  // odd: a pair would straddle a 4-group
  EXPECT_THROW(rms_norm_rope(x, Tensor(), pos, out, p), Error);
  p.rope_offset = 450;  // past the head
  EXPECT_THROW(rms_norm_rope(x, Tensor(), pos, out, p), Error);
  p = v4_params(0);
  EXPECT_THROW(rms_norm_rope(x, Tensor(), pos, Tensor::empty({2, 2, 512}, DType::BF16), p), Error);  // Hp < H
  EXPECT_THROW(rms_norm_rope(x, Tensor(), pos, Tensor::empty({2, 3, 512}, DType::F32), p), Error);   // f32 out
  EXPECT_THROW(rms_norm_rope(x, Tensor(), positions(rng, 3, DType::I64), out, p), Error);
  Tensor neg = Tensor::zeros({2}, DType::I64);
  neg.data<int64_t>()[1] = -1;
  EXPECT_THROW(rms_norm_rope(x, Tensor(), neg, out, p), Error);
  EXPECT_THROW(rms_norm_rope(x, random_bf16({511}, rng), pos, out, p), Error);
  // MODEL1: one 512-wide head, rope at 448; a slot outside the cache writes nothing
  Tensor cache = make_cache(64, 1);
  Tensor slots = Tensor::empty({2}, DType::I64);
  slots.data<int64_t>()[0] = 3, slots.data<int64_t>()[1] = 64;
  Tensor rows = Tensor::empty({2, 512}, DType::BF16);
  poison(rows);
  const Tensor x2 = random_bf16({2, 512}, rng);
  EXPECT_THROW(rms_norm_rope_model1(x2, Tensor(), pos, cache, 64, slots, rows, p), Error);
  for (uint8_t b : bytes(cache)) ASSERT_EQ(b, kPattern);
  for (uint16_t b : bits(rows)) ASSERT_EQ(b, 0xFFFF);
  slots.data<int64_t>()[1] = -1;
  EXPECT_THROW(rms_norm_rope_model1(x, Tensor(), pos, cache, 64, slots, Tensor(), p), Error);  // 3-d x
  p.rope_offset = 446;
  EXPECT_THROW(rms_norm_rope_model1(x2, Tensor(), pos, cache, 64, slots, Tensor(), p), Error);
  p = v4_params(0);
  EXPECT_THROW(rms_norm_rope_model1(x2, Tensor(), pos, cache, 65, slots, Tensor(), p), Error);  // not whole pages
  EXPECT_NO_THROW(rms_norm_rope_model1(x2, Tensor(), pos, cache, 64, slots, Tensor(), p));
}

// ---- CUDA ---------------------------------------------------------------------------------------

TEST(NormRopeCuda, MatchesCpuAndOldCudaSequence) {
  DSA_REQUIRE_CUDA();
  Rng rng = seeded(1205, "NormRopeCuda.MatchesCpuAndOldCudaSequence");
  const Device dev = Device::cuda();
  for (const QCase& c : kQCases) {
    const NormRopeParams p = v4_params(c.ratio, c.D);
    Tensor full = random_act({c.T, c.H, c.D + c.pad}, c.xdt, rng, 3.f);
    const Tensor x = full.slice(2, 0, c.D), xd = full.to(dev).slice(2, 0, c.D);
    const Tensor w = c.weighted ? random_act({c.D}, c.wdt, rng) : Tensor();
    const Tensor wd = w.defined() ? w.to(dev) : Tensor();
    const Tensor pos = positions(rng, c.T, c.pdt), posd = pos.to(dev);
    Tensor ref = Tensor::empty({c.T, c.Hp, c.D}, DType::BF16);
    rms_norm_rope_cpu(x, w, pos, ref, p);
    Tensor out = Tensor::empty({c.T, c.Hp, c.D}, DType::BF16, dev);
    poison(out);
    rms_norm_rope(xd, wd, posd, out, p);
    expect_close(out, ref, 8e-3, 8e-3, q_name(c));  // also: every element finite (written)
    expect_zero_heads(out, c.H, q_name(c));
    expect_same_bits(out, old_sequence(xd, wd, posd, c.Hp, p), "old CUDA sequence " + q_name(c));
  }
  // a misaligned x (the view starts one column into its buffer: scalar loads) and a padded out
  Tensor full = random_bf16({3, 4, 513}, rng);
  const Tensor x = full.slice(2, 1, 513), xd = full.to(dev).slice(2, 1, 513);
  const Tensor pos = positions(rng, 3, DType::I64);
  const NormRopeParams p = v4_params(0);
  Tensor ref = Tensor::empty({3, 6, 512}, DType::BF16);
  rms_norm_rope_cpu(x, Tensor(), pos, ref, p);
  Tensor outfull = Tensor::empty({3, 6, 520}, DType::BF16, dev);
  poison(outfull);
  rms_norm_rope(xd, Tensor(), pos.to(dev), outfull.slice(2, 0, 512), p);
  expect_close(outfull.to(Device::cpu()).slice(2, 0, 512).contiguous(), ref, 8e-3, 8e-3, "misaligned x, strided out");
}

TEST(NormRopeCuda, Model1CacheBytesMatchOldCudaPathAndCpuQuantisation) {
  DSA_REQUIRE_CUDA();
  Rng rng = seeded(1206, "NormRopeCuda.Model1CacheBytesMatchOldCudaPathAndCpuQuantisation");
  const Device dev = Device::cuda();
  for (const M1Case& c : kM1Cases) {
    const NormRopeParams p = v4_params(c.ratio);
    const Tensor x = random_act({c.T, 512}, c.xdt, rng, 2.f), w = random_bf16({512}, rng);
    const Tensor xd = x.to(dev), wd = w.to(dev);
    const Tensor pos = positions(rng, c.T, DType::I64), posd = pos.to(dev);
    Tensor slots = make_slots(rng, c.T, c.pages * c.P);
    if (c.T > 4) slots.data<int64_t>()[4] = c.pages * c.P + 7;  // outside the cache: the kernel skips it
    const Tensor slotsd = slots.to(dev);
    Tensor fused = make_cache(c.P, c.pages, dev), old = make_cache(c.P, c.pages, dev);
    Tensor rows = Tensor::empty({c.T, 512}, DType::BF16, dev);
    poison(rows);
    rms_norm_rope_model1(xd, wd, posd, fused, c.P, slotsd, rows, p);
    old_model1(xd, wd, posd, old, c.P, slotsd, p);
    const std::string what = fmt::format("T={} P={}", c.T, c.P);
    EXPECT_EQ(bytes(fused), bytes(old)) << what;
    expect_same_bits(rows, old_sequence(xd, wd, posd, 1, p).reshape({c.T, 512}), "rows vs old CUDA " + what);
    // the rows against the CPU reference (one bf16 ulp) ...
    Tensor ref = Tensor::empty({c.T, 512}, DType::BF16);
    rms_norm_rope_cpu(x, w, pos, ref, p);
    expect_close(rows, ref, 8e-3, 8e-3, "rows vs CPU " + what);
    // ... and the cache against the CPU quantisation of the kernel's own rows (exact)
    Tensor cpu_slots = slots;
    if (c.T > 4) cpu_slots.data<int64_t>()[4] = -1;
    Tensor want = make_cache(c.P, c.pages);
    formats::kv_insert_cpu({.format = formats::KvFormat::Model1,
                            .page_size = c.P,
                            .cache = want,
                            .kv = rows.to(Device::cpu()),
                            .slots = cpu_slots});
    EXPECT_EQ(bytes(fused), bytes(want)) << what;
    Tensor again = make_cache(c.P, c.pages, dev);
    rms_norm_rope_model1(xd, wd, posd, again, c.P, slotsd, Tensor(), p);
    EXPECT_EQ(bytes(again), bytes(old)) << "without rows " << what;
  }
}
