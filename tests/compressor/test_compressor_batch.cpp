// The batched compressor (ops/compressor/compressor_batch.h): several requests of one step at
// different positions, their states in shuffled slots of one pool, over steps that mix prefill
// chunks and single decode tokens and start new requests mid-way (slot reused, state cleared by
// the op). The CPU batched op must equal the per-request form exactly (entries and states); the
// CUDA kernel must match the CPU within the per-request kernel's bound, and write every entry row.
#include <algorithm>
#include <cstring>
#include <numeric>

#include "dsa/ops/compressor/compressor_batch.h"
#include "common/op_helpers.h"

using namespace dsa;
using namespace dsa::ops;
using namespace dsa::test;

namespace {

struct Request {
  int slot = 0;
  int64_t pos = 0;           // next position
  CompressorState reference;  // the per-request form
};

Tensor i32(const std::vector<int32_t>& v) {
  Tensor t = Tensor::empty({static_cast<int64_t>(v.size())}, DType::I32);
  std::copy(v.begin(), v.end(), t.data<int32_t>());
  return t;
}

// Steps: each is a list of (request, tokens) in batch order; request index -1 of a pair restarts
// that request (new request in its slot).
struct Case {
  int64_t m, d;
  DType out_dtype;
};

void run_case(const Case& c, Device dev) {
  Rng rng(17 + c.m + c.d);
  const CompressorConfig cfg = CompressorConfig::v4(c.m, c.d);
  const int64_t W = cfg.width();
  const size_t slot_bytes = compressor_state_bytes(cfg);
  const int slots = 5;
  Tensor pool = Tensor::empty({static_cast<int64_t>(slot_bytes) * slots}, DType::U8);
  pool.fill_bytes(0xAB);  // garbage: a new request's slot must be cleared by the op
  Tensor pool_dev = pool.to(dev);
  const Tensor ape = random_f32({c.m, W}, rng), nw = random_f32({c.d}, rng, 0.5f);
  const Tensor ape_d = ape.to(dev), nw_d = nw.to(dev);
  std::vector<Request> reqs(3);
  const int slot_of[3] = {4, 1, 2};
  for (int r = 0; r < 3; ++r) {
    reqs[r].slot = slot_of[r];
    reqs[r].reference = CompressorState::create(cfg);
  }
  const int64_t big = 2 * c.m + 3;
  const std::vector<std::vector<std::pair<int, int64_t>>> steps = {
      {{0, big}, {1, 1}, {2, 5}},
      {{1, c.m + 1}, {0, 1}},
      {{2, 1}, {0, 1}, {1, 1}},
      {{0, c.m}, {2, 3 * c.m - 1}},
      {{1, 1}, {2, 1}, {0, 1}},
  };
  for (size_t si = 0; si < steps.size(); ++si) {
    const auto& step = steps[si];
    if (si == 3) {  // request 1 finishes; a new one takes its slot
      reqs[1].pos = 0;
      reqs[1].reference = CompressorState::create(cfg);
    }
    std::vector<int32_t> state_slots, qs{0}, cached, es{0};
    int64_t T = 0;
    for (auto [r, n] : step) {
      state_slots.push_back(reqs[r].slot);
      cached.push_back(static_cast<int32_t>(reqs[r].pos));
      T += n;
      qs.push_back(static_cast<int32_t>(T));
      es.push_back(es.back() + static_cast<int32_t>(compressor_entries_emitted(cfg, reqs[r].pos, n)));
    }
    const int64_t E = es.back();
    const Tensor kv = random_bf16({T, W}, rng), score = random_bf16({T, W}, rng);
    CompressorBatch b{pool, i32(state_slots), i32(qs), i32(cached), i32(es)};
    Tensor out = Tensor::empty({E, c.d}, c.out_dtype);
    poison(out);
    compressor_forward_batch(cfg, b, kv, score, ape, nw, out);
    // Per-request form: the same tokens through each request's own state.
    Tensor want = Tensor::empty({E, c.d}, c.out_dtype);
    for (size_t i = 0; i < step.size(); ++i) {
      const auto [r, n] = step[i];
      compressor_forward(cfg, reqs[r].reference, kv.slice(0, qs[i], qs[i + 1]), score.slice(0, qs[i], qs[i + 1]), ape,
                         nw, want.slice(0, es[i], es[i + 1]));
      reqs[r].pos += n;
    }
    if (E > 0) expect_close(out, want, 1e-30, 0, fmt::format("batched vs per-request, step {}", si));
    for (auto [r, n] : step) {  // states equal byte for byte
      const uint8_t* s = pool.data<uint8_t>() + static_cast<size_t>(reqs[r].slot) * slot_bytes;
      EXPECT_EQ(std::memcmp(s, reqs[r].reference.kv.raw(), slot_bytes / 2), 0) << "step " << si << " request " << r;
      EXPECT_EQ(std::memcmp(s + slot_bytes / 2, reqs[r].reference.score.raw(), slot_bytes / 2), 0);
    }
    if (!dev.is_cuda()) continue;
    CompressorBatch bd{pool_dev, b.state_slots.to(dev), b.query_start.to(dev), b.cached_lens.to(dev),
                       b.entry_start.to(dev)};
    Tensor out_d = Tensor::empty({E, c.d}, c.out_dtype, dev);
    poison(out_d);
    compressor_forward_batch(cfg, bd, kv.to(dev), score.to(dev), ape_d, nw_d, out_d);
    const double tol = c.out_dtype == DType::BF16 ? 1.6e-2 : 2e-5;  // as the per-request CUDA path
    if (E > 0) expect_close(out_d, out, tol, tol, fmt::format("CUDA vs CPU batched, m={} d={} step {}", c.m, c.d, si));
  }
}

TEST(ModelopsCompressorBatch, CpuEqualsPerRequestForm) {
  for (Case c : {Case{4, 512, DType::BF16}, Case{4, 128, DType::F32}, Case{128, 64, DType::BF16}})
    run_case(c, Device::cpu());
}

TEST(ModelopsCompressorBatch, CudaMatchesCpu) {
  DSA_REQUIRE_CUDA();
  for (Case c : {Case{4, 512, DType::BF16}, Case{4, 128, DType::F32}, Case{128, 512, DType::BF16}})
    run_case(c, Device::cuda(0));
}

// Padding rows of a bucketed decode step (kv::pad_metadata): state slot -1, one token at
// position 0, one entry row each. They touch no state and write no entry row, and the real
// request's entries and state are those of the step without them.
void run_padding_case(Device dev) {
  const CompressorConfig cfg = CompressorConfig::v4(4, 64);
  const int64_t W = cfg.width(), d = 64;
  const size_t slot_bytes = compressor_state_bytes(cfg);
  Rng rng(29);
  const Tensor ape = random_f32({4, W}, rng).to(dev), nw = random_f32({d}, rng, 0.5f).to(dev);
  const Tensor kv = random_bf16({6, W}, rng), score = random_bf16({6, W}, rng);
  // Real request in slot 1, 4 tokens from position 0 (one entry); slot 0 holds a pattern.
  auto fresh_pool = [&] {
    Tensor p = Tensor::empty({static_cast<int64_t>(slot_bytes) * 2}, DType::U8);
    p.fill_bytes(0x5C);
    return p.to(dev);
  };
  Tensor alone_pool = fresh_pool(), padded_pool = fresh_pool();
  auto on = [&](const Tensor& t) { return t.to(dev); };
  CompressorBatch alone{alone_pool, on(i32({1})), on(i32({0, 4})), on(i32({0})), on(i32({0, 4}))};
  Tensor want = Tensor::empty({4, d}, DType::F32, dev);
  compressor_forward_batch(cfg, alone, kv.slice(0, 0, 4).to(dev), score.slice(0, 0, 4).to(dev), ape, nw, want);
  // The same request followed by two padding rows (tokens 4 and 5).
  CompressorBatch padded{padded_pool, on(i32({1, -1, -1})), on(i32({0, 4, 5, 6})), on(i32({0, 0, 0})),
                         on(i32({0, 4, 5, 6}))};
  Tensor out = Tensor::empty({6, d}, DType::F32, dev);
  poison(out);
  Tensor poisoned = out.to(Device::cpu());
  compressor_forward_batch(cfg, padded, kv.to(dev), score.to(dev), ape, nw, out);
  const Tensor got = out.to(Device::cpu()), ref = want.to(Device::cpu());
  EXPECT_EQ(std::memcmp(got.raw(), ref.raw(), static_cast<size_t>(d) * sizeof(float)), 0) << "the real entry";
  EXPECT_EQ(std::memcmp(got.data<float>() + 4 * d, poisoned.data<float>() + 4 * d, 2 * d * sizeof(float)), 0)
      << "padding rows' entry rows must stay unwritten";
  const Tensor a = alone_pool.to(Device::cpu()), p = padded_pool.to(Device::cpu());
  EXPECT_EQ(std::memcmp(a.raw(), p.raw(), 2 * slot_bytes), 0) << "states (slot 0 untouched, slot 1 as alone)";
  for (size_t i = 0; i < slot_bytes; ++i) ASSERT_EQ(p.data<uint8_t>()[i], 0x5C) << "slot 0 byte " << i;
}

TEST(ModelopsCompressorBatch, PaddingRowsWithStateSlotMinusOneAreSkipped) { run_padding_case(Device::cpu()); }

TEST(ModelopsCompressorBatch, CudaPaddingRowsWithStateSlotMinusOneAreSkipped) {
  DSA_REQUIRE_CUDA();
  run_padding_case(Device::cuda(0));
}

TEST(ModelopsCompressorBatch, RejectsInconsistentMetadata) {
  const CompressorConfig cfg = CompressorConfig::v4(4, 64);
  const int64_t W = cfg.width();
  Tensor pool = Tensor::zeros({static_cast<int64_t>(compressor_state_bytes(cfg)) * 2}, DType::U8);
  Rng rng(3);
  const Tensor kv = random_bf16({4, W}, rng), ape = random_f32({4, W}, rng), nw = random_f32({64}, rng);
  Tensor out = Tensor::empty({1, 64}, DType::F32);
  // 4 tokens from position 0 close one window, but entry_start gives the request 0 rows.
  CompressorBatch b{pool, i32({0}), i32({0, 4}), i32({0}), i32({0, 0})};
  EXPECT_NE(error_of([&] { compressor_forward_batch(cfg, b, kv, kv, ape, nw, out.slice(0, 0, 0)); })
                .find("emits 1 entries at positions [0, 4) but entry_start gives it 0 rows"),
            std::string::npos);
  b.state_slots = i32({2});  // a slot outside the pool of 2
  EXPECT_NE(error_of([&] { compressor_forward_batch(cfg, b, kv, kv, ape, nw, out.slice(0, 0, 0)); }).find("state slot 2"),
            std::string::npos);
  b.state_slots = i32({-2});  // only -1 means padding
  EXPECT_NE(error_of([&] { compressor_forward_batch(cfg, b, kv, kv, ape, nw, out.slice(0, 0, 0)); }).find("state slot -2"),
            std::string::npos);
}

}  // namespace
