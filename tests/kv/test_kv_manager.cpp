// KvManager: allocation and release, sliding-window page freeing, compressed-entry slots across
// chunk boundaries, out of memory, block-table padding, request state.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <map>
#include <string>
#include <vector>

#include "dsa/core/device.h"
#include "common/testing.h"
#include "util.h"

using dsa::test::error_of;

namespace dsa::kv {
namespace {

using test::positions_batch;
using test::reference_slot;

std::vector<int32_t> row(const GroupMetadata& g, int64_t r) {
  const int64_t w = g.block_table.size(1);
  const int32_t* p = g.block_table.data<int32_t>() + r * w;
  return std::vector<int32_t>(p, p + w);
}

std::vector<int64_t> i64s(const Tensor& t) { return std::vector<int64_t>(t.data<int64_t>(), t.data<int64_t>() + t.numel()); }
std::vector<int32_t> i32s(const Tensor& t) { return std::vector<int32_t>(t.data<int32_t>(), t.data<int32_t>() + t.numel()); }

KvManager glm_manager(int64_t num_blocks, int block = 64) {
  KvManagerOptions opt;
  opt.num_blocks = num_blocks;
  return KvManager(test::reqs_of(test::tiny_glm({"full", "shared"}), block), opt);
}

TEST(KvManager, AllocateAndRelease) {
  KvManager kv = glm_manager(8);
  ASSERT_EQ(kv.groups().size(), 1u);
  kv.add_request(5);
  EXPECT_EQ(error_of([&] { kv.add_request(5); }), "KV manager: request 5 is already registered");
  auto m = kv.prepare(positions_batch(5, 0, 100));  // 100 tokens: 2 pages of 64
  EXPECT_EQ(kv.num_cached(5), 100);
  EXPECT_EQ(kv.num_free_pages(0), 6);
  EXPECT_EQ(row(m.groups[0], 0), (std::vector<int32_t>{0, 1, -1, -1}));  // as wide as index_len 256 needs
  EXPECT_EQ(i32s(m.seq_lens), (std::vector<int32_t>{100}));
  EXPECT_EQ(i32s(m.cached_lens), (std::vector<int32_t>{0}));
  EXPECT_EQ(i32s(m.query_start), (std::vector<int32_t>{0, 100}));
  EXPECT_FALSE(m.token_ids.defined());
  auto slots = i64s(m.groups[0].slots);
  for (int64_t t = 0; t < 100; ++t) EXPECT_EQ(slots[t], t);  // pages 0, 1 in order
  EXPECT_EQ(m.groups[0].entry_tokens.numel(), 100);

  // Decode steps fill page 1, then take page 2.
  for (int64_t p = 100; p < 130; ++p) kv.prepare(positions_batch(5, p, 1));
  EXPECT_EQ(kv.block_table(5, 0), (std::vector<int32_t>{0, 1, 2}));
  kv.add_request(6);
  kv.prepare(positions_batch(6, 0, 1));
  EXPECT_EQ(kv.block_table(6, 0), (std::vector<int32_t>{3}));
  EXPECT_EQ(kv.num_free_pages(0), 4);
  kv.release(5);
  EXPECT_EQ(kv.num_free_pages(0), 7);
  EXPECT_FALSE(kv.has_request(5));
  EXPECT_EQ(error_of([&] { kv.release(5); }), "KV manager: unknown request 5");
  // Freed pages are reused, most recently freed first (deterministic).
  kv.add_request(7);
  kv.prepare(positions_batch(7, 0, 130));
  EXPECT_EQ(kv.block_table(7, 0), (std::vector<int32_t>{2, 1, 0}));
  kv.release(6);
  kv.release(7);
  EXPECT_EQ(kv.num_free_pages(0), 8);
}

TEST(KvManager, IndexLenBuckets) {
  // Multiples of max(256, bit_floor(n) / 8): at most max(255, n / 8) over n, never below it.
  EXPECT_EQ(index_len_bucket(0), 0);
  EXPECT_EQ(index_len_bucket(1), 256);
  EXPECT_EQ(index_len_bucket(256), 256);
  EXPECT_EQ(index_len_bucket(257), 512);
  EXPECT_EQ(index_len_bucket(2048), 2048);
  EXPECT_EQ(index_len_bucket(2049), 2304);
  EXPECT_EQ(index_len_bucket(4097), 4608);
  EXPECT_EQ(index_len_bucket(1 << 20), 1 << 20);
  int64_t buckets = 0, prev = -1;
  for (int64_t n = 1; n <= (1 << 16); ++n) {
    const int64_t b = index_len_bucket(n);
    ASSERT_GE(b, n);
    ASSERT_LE(b, n + std::max<int64_t>(255, n / 8)) << n;
    ASSERT_GE(b, prev) << n;  // monotone
    buckets += b != prev;
    prev = b;
  }
  EXPECT_LE(buckets, 8 * 9 + 8);  // about eight per doubling above 2048
}

TEST(KvManager, DecodeBatchBuckets) {
  // Powers of two up to the cap, the cap itself as the last bucket, no padding above it.
  EXPECT_EQ(decode_batch_bucket(0, 8), 0);
  EXPECT_EQ(decode_batch_bucket(1, 8), 1);
  EXPECT_EQ(decode_batch_bucket(2, 8), 2);
  EXPECT_EQ(decode_batch_bucket(3, 8), 4);
  EXPECT_EQ(decode_batch_bucket(5, 8), 8);
  EXPECT_EQ(decode_batch_bucket(8, 8), 8);
  EXPECT_EQ(decode_batch_bucket(9, 8), 9);
  EXPECT_EQ(decode_batch_bucket(9, 12), 12);
  EXPECT_EQ(decode_batch_bucket(12, 12), 12);
  EXPECT_EQ(decode_batch_bucket(13, 12), 13);
  EXPECT_EQ(decode_batch_bucket(100, 128), 128);
  EXPECT_EQ(decode_batch_bucket(3, 0), 3);  // no buckets
  for (int64_t cap : {1, 6, 64, 100, 256}) {
    int64_t prev = 0, buckets = 0;
    for (int64_t n = 1; n <= 300; ++n) {
      const int64_t b = decode_batch_bucket(n, cap);
      ASSERT_GE(b, n);
      ASSERT_GE(b, prev) << n;  // monotone
      if (n <= cap) {
        ASSERT_LE(b, cap);
        ASSERT_TRUE(b == cap || std::has_single_bit(static_cast<uint64_t>(b))) << n;
        buckets += b != prev;
      } else {
        ASSERT_EQ(b, n);
      }
      prev = b;
    }
    EXPECT_EQ(buckets, std::bit_width(static_cast<uint64_t>(cap - 1)) + 1) << cap;  // 1, 2, 4, ..., cap
  }
}

// Padding rows: appended after the real rows, -1 slots and state slot, empty block-table rows,
// zero lengths, one entry row each; the real rows and the context bucket unchanged.
TEST(KvManager, PaddedMetadataRows) {
  KvManagerOptions opt;
  opt.num_blocks = 16;
  opt.max_requests = 4;
  opt.max_step_tokens = 256;
  KvManager kv(test::reqs_of(test::tiny_v4({0, 4, 128, 4}), 256), opt);
  for (RequestId id : {3, 9}) kv.add_request(id);
  Batch pre;
  pre.add(3, 0, std::vector<int32_t>(7, 5));
  pre.add(9, 0, std::vector<int32_t>(130, 6));
  kv.prepare(pre);
  Batch b;
  b.add(3, 7, std::vector<int32_t>{11});
  b.add(9, 130, std::vector<int32_t>{12});
  const BatchMetadata plain = kv.draft_metadata(b);  // the same rows prepare builds, without moving anything
  BatchMetadata m = kv.prepare(b);
  pad_metadata(m, 2);
  ASSERT_EQ(m.num_tokens(), 4);
  ASSERT_EQ(m.num_requests(), 4);
  EXPECT_EQ(m.request_ids, (std::vector<RequestId>{3, 9, kPaddingRequest, kPaddingRequest}));
  EXPECT_EQ(m.max_seq_len, 131);
  EXPECT_EQ(m.index_len, plain.index_len);
  EXPECT_EQ(i32s(m.token_ids), (std::vector<int32_t>{11, 12, 0, 0}));
  EXPECT_EQ(i32s(m.token_req), (std::vector<int32_t>{0, 1, 2, 3}));
  EXPECT_EQ(i32s(m.positions), (std::vector<int32_t>{7, 130, 0, 0}));
  EXPECT_EQ(i32s(m.query_start), (std::vector<int32_t>{0, 1, 2, 3, 4}));
  EXPECT_EQ(i32s(m.cached_lens), (std::vector<int32_t>{7, 130, 0, 0}));
  EXPECT_EQ(i32s(m.seq_lens), (std::vector<int32_t>{8, 131, 0, 0}));
  EXPECT_EQ(i32s(m.state_slots)[2], -1);
  EXPECT_EQ(i32s(m.state_slots)[3], -1);
  EXPECT_EQ(i32s(m.state_slots)[0], kv.state_slot(3));
  ASSERT_EQ(m.groups.size(), plain.groups.size());
  for (size_t g = 0; g < m.groups.size(); ++g) {
    const GroupMetadata &p = m.groups[g], &q = plain.groups[g];
    ASSERT_EQ(p.block_table.size(1), q.block_table.size(1));
    for (int64_t r = 0; r < 2; ++r) EXPECT_EQ(row(p, r), row(q, r)) << "group " << g;
    for (int64_t r = 2; r < 4; ++r)
      EXPECT_EQ(row(p, r), std::vector<int32_t>(static_cast<size_t>(q.block_table.size(1)), -1)) << "group " << g;
    std::vector<int64_t> slots = i64s(q.slots), entry_slots = i64s(q.entry_slots);
    std::vector<int32_t> entry_tokens = i32s(q.entry_tokens), entry_start = i32s(q.entry_start);
    slots.insert(slots.end(), {-1, -1});
    entry_slots.insert(entry_slots.end(), {-1, -1});
    entry_tokens.insert(entry_tokens.end(), {-1, -1});
    entry_start.insert(entry_start.end(), {3, 4});
    EXPECT_EQ(i64s(p.slots), slots) << "group " << g;
    EXPECT_EQ(i64s(p.entry_slots), entry_slots) << "group " << g;
    EXPECT_EQ(i32s(p.entry_tokens), entry_tokens) << "group " << g;
    EXPECT_EQ(i32s(p.entry_start), entry_start) << "group " << g;
  }
  pad_metadata(m, 0);  // nothing
  EXPECT_EQ(m.num_tokens(), 4);

  // A step of padding rows only, at a chosen context bucket: what the start-up capture runs.
  const BatchMetadata only = kv.padding_metadata(3, 512);
  EXPECT_EQ(only.num_tokens(), 3);
  EXPECT_EQ(only.num_requests(), 3);
  EXPECT_EQ(only.index_len, 512);
  EXPECT_EQ(only.max_seq_len, 0);
  EXPECT_EQ(i32s(only.token_ids), (std::vector<int32_t>{0, 0, 0}));
  EXPECT_EQ(i32s(only.state_slots), (std::vector<int32_t>{-1, -1, -1}));
  EXPECT_EQ(i32s(only.seq_lens), (std::vector<int32_t>{0, 0, 0}));
  EXPECT_EQ(i32s(only.query_start), (std::vector<int32_t>{0, 1, 2, 3}));
  for (const GroupMetadata& g : only.groups) {
    EXPECT_EQ(g.block_table.size(0), 3);
    EXPECT_EQ(g.block_table.size(1), std::max<int64_t>(1, 512 / g.ratio / g.page_size));
    for (int64_t r = 0; r < 3; ++r)
      for (int32_t p : row(g, r)) EXPECT_EQ(p, -1);
    EXPECT_EQ(i64s(g.slots), (std::vector<int64_t>{-1, -1, -1}));
    EXPECT_EQ(i32s(g.entry_start), (std::vector<int32_t>{0, 1, 2, 3}));
  }
  EXPECT_NE(error_of([&] { kv.padding_metadata(2, 300); }).find("not a context bucket"), std::string::npos);
  // It changed nothing.
  EXPECT_EQ(kv.num_cached(3), 8);
  EXPECT_EQ(kv.num_requests(), 2);
}

TEST(KvManager, StepMustContinueTheCache) {
  KvManager kv = glm_manager(8);
  EXPECT_EQ(error_of([&] { kv.prepare(positions_batch(1, 0, 1)); }),
            "KV manager: batch token 0 belongs to unknown request 1 (add_request first)");
  kv.add_request(1);
  kv.prepare(positions_batch(1, 0, 10));
  EXPECT_EQ(error_of([&] { kv.prepare(positions_batch(1, 11, 1)); }),
            "KV manager: request 1 starts at position 11 in the batch but its cache holds 10 tokens (a step must "
            "continue where the cache ends)");
  EXPECT_NE(error_of([&] { kv.prepare(positions_batch(1, 9, 2)); })
                .find("request 1 starts at position 9 in the batch but its cache holds 10 tokens"),
            std::string::npos);
  EXPECT_EQ(kv.num_cached(1), 10);
  KvManagerOptions opt;
  opt.num_blocks = 8;
  opt.max_requests = 1;
  opt.max_position = 64;
  KvManager lim(test::reqs_of(test::tiny_glm({"full"}), 64), opt);
  lim.add_request(1);
  EXPECT_EQ(error_of([&] { lim.add_request(2); }), "KV manager: cannot add request 2: max_requests = 1 are registered");
  EXPECT_EQ(error_of([&] { lim.prepare(positions_batch(1, 0, 65)); }),
            "batch: token 64 (request 1) has position 64 (must be in [0, 64))");
}

TEST(KvManager, BlockTablePaddingAndOrder) {
  KvManager kv = glm_manager(16);
  for (RequestId id : {30, 10, 20}) kv.add_request(id);
  Batch b;
  b.add_positions(30, 0, 10);
  b.add_positions(10, 0, 130);
  b.add_positions(20, 0, 64);
  auto m = kv.prepare(b);
  EXPECT_EQ(m.request_ids, (std::vector<RequestId>{30, 10, 20}));
  const GroupMetadata& g = m.groups[0];
  // The table is as wide as the step's context bucket needs: 130 tokens -> index_len 256 -> 4 pages.
  EXPECT_EQ(m.index_len, 256);
  ASSERT_EQ(g.block_table.shape(), (Shape{3, 4}));
  EXPECT_EQ(g.block_table.dtype(), DType::I32);
  EXPECT_EQ(row(g, 0), (std::vector<int32_t>{0, -1, -1, -1}));
  EXPECT_EQ(row(g, 1), (std::vector<int32_t>{1, 2, 3, -1}));
  EXPECT_EQ(row(g, 2), (std::vector<int32_t>{4, -1, -1, -1}));
  EXPECT_EQ(g.num_pages, 16);
  EXPECT_EQ(g.page_size, 64);
  auto req = i32s(m.token_req);
  EXPECT_EQ(req[9], 0);
  EXPECT_EQ(req[10], 1);
  EXPECT_EQ(req[139], 1);
  EXPECT_EQ(req[140], 2);
  EXPECT_EQ(i32s(m.query_start), (std::vector<int32_t>{0, 10, 140, 204}));
  EXPECT_EQ(m.max_seq_len, 130);
  EXPECT_EQ(m.positions.data<int32_t>()[140], 0);
  EXPECT_EQ(m.positions.data<int32_t>()[139], 129);
  // Every slot is the slot formula (docs/kv-cache.md) over the block table.
  auto slots = i64s(g.slots);
  auto pos = i32s(m.positions);
  for (int64_t t = 0; t < 204; ++t) EXPECT_EQ(slots[t], reference_slot(g, req[t], pos[t])) << t;
  // Next step: decode of two of them; the table keeps the width of its context bucket.
  Batch d;
  d.add(20, 64, std::vector<int32_t>{42});
  d.add(30, 10, std::vector<int32_t>{43});
  auto m2 = kv.prepare(d);
  EXPECT_EQ(m2.groups[0].block_table.shape(), (Shape{2, 4}));
  EXPECT_EQ(row(m2.groups[0], 0), (std::vector<int32_t>{4, 5, -1, -1}));
  EXPECT_EQ(row(m2.groups[0], 1), (std::vector<int32_t>{0, -1, -1, -1}));
  EXPECT_EQ(i32s(m2.token_ids), (std::vector<int32_t>{42, 43}));
  EXPECT_EQ(i64s(m2.groups[0].slots), (std::vector<int64_t>{5 * 64, 10}));
}

// Single request, one token per step: after each prepare the SWA block table holds exactly the
// pages of positions [max(p - 127, 0), p]; everything behind is -1 and back in the free list.
void check_window_freeing(const model::ModelConfig& config, int block, int expect_live) {
  KvManagerOptions opt;
  opt.num_blocks = 64;
  opt.max_requests = 2;
  opt.max_step_tokens = 64;
  KvManager kv(test::reqs_of(config, block), opt);
  const int g = test::group_index(kv, "swa");
  ASSERT_EQ(kv.groups()[g].max_live_pages, expect_live);
  ASSERT_EQ(kv.groups()[g].window, 128);
  const int64_t total = kv.num_pages(g);
  kv.add_request(1);
  kv.add_request(2);
  int max_held = 0;
  for (int64_t p = 0; p < 1200; ++p) {
    Batch b;
    b.add_positions(1, p, 1);
    if (p % 3 == 0) b.add_positions(2, p / 3, 1);  // a slower request interleaved
    auto m = kv.prepare(b);
    const auto& bt = kv.block_table(1, g);
    const int64_t first = std::max<int64_t>(p - 127, 0) / block, last = p / block;
    ASSERT_EQ(static_cast<int64_t>(bt.size()), last + 1);
    for (int64_t i = 0; i <= last; ++i) ASSERT_EQ(bt[i] >= 0, i >= first) << "position " << p << " block " << i;
    max_held = std::max<int>(max_held, static_cast<int>(kv.pages_held(1, g)));
    ASSERT_EQ(kv.num_free_pages(g) + kv.pages_held(1, g) + kv.pages_held(2, g), total);
    // The window of this token maps to held pages (what ops/sparse_index swa_window_slots reads).
    for (int64_t q = std::max<int64_t>(p - 127, 0); q <= p; ++q) ASSERT_GE(reference_slot(m.groups[g], 0, q), 0);
    ASSERT_EQ(reference_slot(m.groups[g], 0, first * block - 1), -1);
  }
  EXPECT_EQ(max_held, expect_live);
  kv.release(1);
  kv.release(2);
  EXPECT_EQ(kv.num_free_pages(g), total);
}

TEST(KvManager, WindowPagesFreedBlock64) { check_window_freeing(test::tiny_v4({0, 4, 0}), 64, 3); }
TEST(KvManager, WindowPagesFreedBlock256) { check_window_freeing(test::tiny_v4({0, 4, 128, 4}), 256, 2); }

// Chunked prefill: the first token of a chunk still sees its full window of earlier positions.
TEST(KvManager, WindowAcrossChunks) {
  KvManagerOptions opt;
  opt.num_blocks = 64;
  opt.max_requests = 1;
  opt.max_step_tokens = 512;
  KvManager kv(test::reqs_of(test::tiny_v4({0, 4, 0}), 64), opt);
  const int g = test::group_index(kv, "swa");
  kv.add_request(1);
  int64_t p = 0;
  for (int64_t n : {300, 1, 200, 5, 64, 129}) {
    auto m = kv.prepare(positions_batch(1, p, n));
    for (int64_t t = 0; t < n; ++t)
      for (int64_t q = std::max<int64_t>(p + t - 127, 0); q <= p + t; ++q)
        ASSERT_GE(reference_slot(m.groups[g], 0, q), 0) << "token at " << p + t << " reads " << q;
    // No two positions of the chunk's windows share a slot.
    std::map<int64_t, int64_t> owner;
    for (int64_t q = std::max<int64_t>(p - 127, 0); q < p + n; ++q) {
      auto [it, fresh] = owner.emplace(reference_slot(m.groups[g], 0, q), q);
      ASSERT_TRUE(fresh) << "positions " << it->second << " and " << q << " share a slot";
    }
    p += n;
  }
  EXPECT_LE(kv.pages_held(1, g), (127 + 129) / 64 + 2);
}

// Entries of ratio m: written by positions with (pos + 1) % m == 0, at slot(block table, index).
// Chunked prefill + decode gives the same slot for every entry as one full prefill.
void check_compressed_chunks(const model::ModelConfig& config, int block, const char* group, int m,
                             std::vector<int64_t> chunks) {
  auto run = [&](const std::vector<int64_t>& steps) {
    KvManagerOptions opt;
    opt.num_blocks = 64;
    opt.max_requests = 1;
    opt.max_step_tokens = 4096;
    KvManager kv(test::reqs_of(config, block), opt);
    const int g = test::group_index(kv, group);
    EXPECT_EQ(kv.groups()[g].ratio, m);
    kv.add_request(3);
    std::map<int64_t, int64_t> slot_of_pos;
    int64_t p = 0;
    for (int64_t n : steps) {
      auto md = kv.prepare(positions_batch(3, p, n));
      const GroupMetadata& gm = md.groups[g];
      auto slots = i64s(gm.slots);
      auto et = i32s(gm.entry_tokens);
      auto es = i64s(gm.entry_slots);
      size_t k = 0;
      for (int64_t t = 0; t < n; ++t) {
        const int64_t pos = p + t;
        if ((pos + 1) % m != 0) {
          EXPECT_EQ(slots[t], -1) << "position " << pos;
          continue;
        }
        EXPECT_EQ(slots[t], reference_slot(gm, 0, (pos + 1) / m - 1)) << "position " << pos;
        EXPECT_GE(slots[t], 0);
        slot_of_pos[pos] = slots[t];
        EXPECT_LT(k, et.size());
        if (k < et.size()) {
          EXPECT_EQ(et[k], t);
          EXPECT_EQ(es[k], slots[t]);
        }
        ++k;
      }
      // One row per token; the rows after the step's entries hold -1.
      EXPECT_EQ(et.size(), static_cast<size_t>(n));
      for (size_t j = k; j < et.size(); ++j) {
        EXPECT_EQ(et[j], -1) << "row " << j;
        EXPECT_EQ(es[j], -1) << "row " << j;
      }
      p += n;
    }
    return slot_of_pos;
  };
  int64_t total = 0;
  for (int64_t n : chunks) total += n;
  auto chunked = run(chunks);
  auto full = run({total});
  EXPECT_EQ(static_cast<int64_t>(full.size()), total / m);
  EXPECT_EQ(chunked, full);
}

TEST(KvManager, CompressedSlotsRatio4AcrossChunks) {
  // chunks end at 3 mod 4, at 0 mod 4, mid-page and exactly at page ends (64 entries = 256 tokens)
  std::vector<int64_t> chunks{3, 1, 2, 250, 256, 7, 1, 1, 1, 1, 1, 1, 1, 1, 100, 1, 1, 1};
  check_compressed_chunks(test::tiny_v4({0, 4, 128, 4}), 256, "c4", 4, chunks);
  check_compressed_chunks(test::tiny_v4({0, 4, 0}), 64, "c4", 4, chunks);
}

TEST(KvManager, CompressedSlotsRatio128AcrossChunks) {
  std::vector<int64_t> chunks{127, 1, 100, 28, 1, 255, 1, 1, 130, 1, 1, 1, 126, 1, 1};
  check_compressed_chunks(test::tiny_v4({0, 4, 128, 4}), 256, "c128", 128, chunks);
  check_compressed_chunks(test::tiny_v4({128}), 128, "c128", 128, chunks);  // 1 entry per page
}

TEST(KvManager, OutOfMemoryChangesNothing) {
  KvManager kv = glm_manager(4);
  kv.add_request(1);
  kv.add_request(2);
  kv.prepare(positions_batch(1, 0, 200));  // 4 pages
  kv.prepare(positions_batch(2, 0, 0));    // empty segment list: nothing needed
  Batch b;
  b.add_positions(1, 200, 1);
  b.add_positions(2, 0, 10);
  EXPECT_FALSE(kv.can_prepare(b));
  KvDemand d = kv.demand(b);
  EXPECT_EQ(d.needed, (std::vector<int64_t>{1}));
  EXPECT_EQ(d.available, (std::vector<int64_t>{0}));
  EXPECT_THROW(kv.prepare(b), KvOutOfMemory);
  EXPECT_EQ(error_of([&] { kv.prepare(b); }),
            "KV cache out of memory for a batch of 11 tokens: group 'tokens' needs 1 new pages but 0 of 4 are available");
  EXPECT_EQ(kv.num_cached(1), 200);
  EXPECT_EQ(kv.num_cached(2), 0);
  EXPECT_EQ(kv.num_free_pages(0), 0);
  // Request 1 still fits on its own (its last page has room): the scheduler drops request 2.
  Batch one = positions_batch(1, 200, 1);
  EXPECT_TRUE(kv.can_prepare(one));
  kv.prepare(one);
  kv.release(1);  // "preempt"
  EXPECT_TRUE(kv.can_prepare(positions_batch(2, 0, 10)));
  kv.prepare(positions_batch(2, 0, 10));
  EXPECT_EQ(kv.block_table(2, 0).size(), 1u);
}

TEST(KvManager, OutOfMemoryInTheWindowGroup) {
  KvManagerOptions opt;
  opt.num_blocks = 16;
  opt.window_pages = 3;
  KvManager kv(test::reqs_of(test::tiny_v4({0, 4, 0}), 64), opt);
  const int swa = test::group_index(kv, "swa");
  kv.add_request(1);
  kv.add_request(2);
  kv.prepare(positions_batch(1, 0, 130));  // 3 SWA pages
  EXPECT_FALSE(kv.can_prepare(positions_batch(2, 0, 1)));
  std::string e = error_of([&] { kv.prepare(positions_batch(2, 0, 1)); });
  EXPECT_NE(e.find("group 'swa' needs 1 new pages but 0 of 3 are available"), std::string::npos) << e;
  EXPECT_EQ(e.find("group 'c4'"), std::string::npos) << e;
  // Once request 1 holds 191 tokens, no later query of it reads positions < 64 (the window of
  // position 191 starts at 64): the next step frees its page 0 and request 2 takes it.
  kv.prepare(positions_batch(1, 130, 61));
  EXPECT_EQ(kv.pages_held(1, swa), 3);
  Batch b;
  b.add_positions(1, 191, 1);
  b.add_positions(2, 0, 1);
  KvDemand d = kv.demand(b);
  EXPECT_EQ(d.needed[swa], 1);
  EXPECT_EQ(d.available[swa], 1);
  kv.prepare(b);
  EXPECT_EQ(kv.block_table(1, swa), (std::vector<int32_t>{-1, 1, 2}));
  EXPECT_EQ(kv.block_table(2, swa), (std::vector<int32_t>{0}));
}

// State pools: one slot per registered request, handed out and returned with the request, and
// listed in the step metadata in batch order.
TEST(KvManager, StateSlotsLiveWithTheRequest) {
  KvManagerOptions opt;
  opt.num_blocks = 4;
  opt.max_requests = 3;
  KvRequirements r = test::reqs_of(test::tiny_glm({"full"}), 64);
  r.states.push_back({0, "compressor", 64});
  r.states.push_back({0, "other", 32});
  KvManager kv(r, opt);
  EXPECT_EQ(kv.state_pool(0, "compressor").data.nbytes(), 3u * 64);
  EXPECT_EQ(kv.state_pool(0, "other").data.nbytes(), 3u * 32);
  EXPECT_EQ(error_of([&] { kv.state_pool(1, "compressor"); }), "KV manager: layer 1 has no 'compressor' state");
  kv.add_request(1);
  kv.add_request(2);
  EXPECT_NE(kv.state_slot(1), kv.state_slot(2));
  Batch b;
  b.add_positions(2, 0, 3);
  b.add_positions(1, 0, 1);
  auto m = kv.prepare(b);
  EXPECT_EQ(i32s(m.state_slots), (std::vector<int32_t>{kv.state_slot(2), kv.state_slot(1)}));
  const int freed = kv.state_slot(2);
  kv.release(2);
  kv.add_request(3);
  EXPECT_EQ(kv.state_slot(3), freed);  // the freed slot is reused
  kv.add_request(4);
  EXPECT_FALSE(kv.can_admit(1));  // max_requests registered: no slot left
  EXPECT_EQ(error_of([&] { kv.add_request(5); }), "KV manager: cannot add request 5: max_requests = 3 are registered");
  opt.max_requests = 0;
  EXPECT_EQ(error_of([&] { KvManager k(r, opt); }),
            "KV manager: the model keeps per-request state (2 pools): max_requests must be > 0");
}

// Capacity queries: what fits the empty cache, what fits now, and how many tokens the cache holds.
TEST(KvManager, CapacityQueries) {
  KvManager kv = glm_manager(4);  // 4 pages of 64 tokens
  EXPECT_EQ(kv.capacity_tokens(), 256);
  EXPECT_TRUE(kv.fits_alone(256));
  EXPECT_FALSE(kv.fits_alone(257));
  EXPECT_TRUE(kv.can_admit(256));
  kv.add_request(1);
  kv.prepare(positions_batch(1, 0, 65));  // 2 pages
  EXPECT_TRUE(kv.can_admit(128));
  EXPECT_FALSE(kv.can_admit(129));
  EXPECT_EQ(kv.usage()[0].used_pages, 2);
  EXPECT_EQ(kv.usage()[0].total_pages, 4);
  kv.release(1);
  EXPECT_EQ(kv.usage()[0].used_pages, 0);
}

TEST(KvManager, CudaPoolsOnDeviceMetadataOnHost) {
  DSA_REQUIRE_CUDA();
  KvManagerOptions opt;
  opt.num_blocks = 4;
  opt.device = Device::cuda(0);
  KvManager kv(test::reqs_of(test::tiny_glm({"full"}), 64), opt);
  EXPECT_TRUE(kv.pools()[0].data.device().is_cuda());
  kv.add_request(1);
  auto m = kv.prepare(positions_batch(1, 0, 70));
  EXPECT_FALSE(m.groups[0].block_table.device().is_cuda());  // the runner uploads it
  EXPECT_EQ(row(m.groups[0], 0), (std::vector<int32_t>{0, 1, -1, -1}));  // index_len 256: 4 pages wide
  EXPECT_EQ(m.groups[0].slots.data<int64_t>()[69], 69);
}

}  // namespace
}  // namespace dsa::kv
