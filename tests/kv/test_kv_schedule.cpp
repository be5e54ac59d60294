// Property checks over random schedules: many requests interleaved, chunked prefills and
// decodes, out of memory with preemption, releases. After every step:
//  - every page is free or held by exactly one (request, block); counts add up;
//  - each request holds exactly the blocks it should (windowed groups: from the first block a
//    later query can read; others: all), and block-table rows are -1 past them;
//  - each new token's slot is the docs/kv-cache.md formula over the block table, -1 iff it writes no
//    entry; an entry keeps its slot while it lives; no two live entries share a slot;
//  - every position in a new token's sliding window maps to a held page;
//  - windowed groups sized by window_group_pages never run short.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>
#include <tuple>
#include <vector>

#include "common/testing.h"
#include "util.h"

namespace dsa::kv {
namespace {

using Key = std::tuple<RequestId, int, int64_t>;  // request, group, entry index

struct Checker {
  explicit Checker(KvManager& k) : kv(k) {}
  KvManager& kv;
  std::map<Key, int64_t> written;        // slot each entry got when it was written
  std::map<RequestId, int64_t> cached;   // lengths before the current step
  std::map<RequestId, int64_t> trimmed;  // lengths the last prepare freed window pages for

  int64_t entries(int g, int64_t len) const { return len / kv.groups()[g].ratio; }
  int64_t blocks(int g, int64_t len) const {
    const int P = kv.groups()[g].page_size;
    return (entries(g, len) + P - 1) / P;
  }
  int64_t first_live(int g, int64_t next) const {
    const CacheGroupSpec& c = kv.groups()[g];
    return c.window == 0 ? 0 : std::max<int64_t>(next - c.window + 1, 0) / c.page_size;
  }

  void forget(RequestId id) {
    for (auto it = written.begin(); it != written.end();)
      it = std::get<0>(it->first) == id ? written.erase(it) : std::next(it);
    cached.erase(id);
    trimmed.erase(id);
  }

  void after_step(const Batch& b, const BatchMetadata& m) {
    const int G = static_cast<int>(kv.groups().size());
    const auto segs = b.segments();
    ASSERT_EQ(m.num_requests(), static_cast<int>(segs.size()));
    for (int g = 0; g < G; ++g) {
      const GroupMetadata& gm = m.groups[g];
      const int P = gm.page_size, ratio = gm.ratio;
      // Block table shape and rows.
      // Block table shape: the width of the step's bucketed context (at least what each row holds).
      int64_t longest = 0;
      for (const auto& s : segs) longest = std::max(longest, s.end());
      ASSERT_EQ(m.index_len, index_len_bucket(longest));
      const int64_t width = std::max<int64_t>(1, blocks(g, m.index_len));
      ASSERT_EQ(gm.block_table.shape(), (Shape{static_cast<int64_t>(segs.size()), width}));
      std::set<int64_t> step_slots;
      for (size_t r = 0; r < segs.size(); ++r) {
        const auto& s = segs[r];
        const auto& table = kv.block_table(s.id, g);
        for (int64_t i = 0; i < width; ++i) {
          const int32_t v = gm.block_table.data<int32_t>()[r * width + i];
          ASSERT_EQ(v, i < static_cast<int64_t>(table.size()) ? table[i] : -1) << "row " << r << " block " << i;
        }
        for (int64_t t = s.first; t < s.first + s.count; ++t) {
          const int64_t pos = b.position[t];
          ASSERT_EQ(m.token_req.data<int32_t>()[t], static_cast<int32_t>(r));
          ASSERT_EQ(m.positions.data<int32_t>()[t], pos);
          const int64_t slot = gm.slots.data<int64_t>()[t];
          if ((pos + 1) % ratio != 0) {
            ASSERT_EQ(slot, -1);
          } else {
            const int64_t e = (pos + 1) / ratio - 1;
            ASSERT_EQ(slot, test::reference_slot(gm, static_cast<int64_t>(r), e));
            ASSERT_TRUE(slot >= 0 && slot < gm.num_pages * P) << slot;
            ASSERT_TRUE(step_slots.insert(slot).second) << "slot " << slot << " written twice in one step";
            written[{s.id, g, e}] = slot;
          }
          if (gm.window > 0) {
            for (int64_t q = std::max<int64_t>(pos - gm.window + 1, 0); q <= pos; ++q)
              ASSERT_GE(test::reference_slot(gm, static_cast<int64_t>(r), q), 0) << "position " << pos << " reads " << q;
          }
        }
      }
      // One entry row per token: each request's entries first (in position order), then -1 rows.
      ASSERT_EQ(gm.entry_tokens.numel(), m.num_tokens());
      int64_t live = 0;
      for (int64_t j = 0; j < gm.entry_slots.numel(); ++j) live += gm.entry_slots.data<int64_t>()[j] >= 0;
      ASSERT_EQ(live, static_cast<int64_t>(step_slots.size()));
    }
    trimmed = cached;  // prepare freed window pages behind every request's length before the step
    check_state();
    for (const auto& s : segs) cached[s.id] = s.end();
  }

  // Pages, held ranges, slot stability and uniqueness over all registered requests.
  void check_state() {
    const int G = static_cast<int>(kv.groups().size());
    for (int g = 0; g < G; ++g) {
      const int P = kv.groups()[g].page_size;
      std::set<int32_t> pages;
      std::map<int64_t, Key> live;
      int64_t held = 0;
      for (const auto& [id, before] : trimmed) {
        const int64_t now = kv.num_cached(id);
        const auto& table = kv.block_table(id, g);
        ASSERT_EQ(static_cast<int64_t>(table.size()), blocks(g, now)) << "request " << id;
        const int64_t first = first_live(g, before);
        for (int64_t i = 0; i < static_cast<int64_t>(table.size()); ++i) {
          ASSERT_EQ(table[i] >= 0, i >= first) << "request " << id << " group " << g << " block " << i;
          if (table[i] < 0) continue;
          ++held;
          ASSERT_TRUE(pages.insert(table[i]).second) << "page " << table[i] << " held twice";
        }
        for (int64_t e = first * P; e < entries(g, now); ++e) {
          const int64_t slot = static_cast<int64_t>(table[e / P]) * P + e % P;
          auto w = written.find({id, g, e});
          ASSERT_NE(w, written.end()) << "live entry " << e << " of request " << id << " was never written";
          ASSERT_EQ(w->second, slot) << "entry " << e << " of request " << id << " moved";
          auto [it, fresh] = live.emplace(slot, Key{id, g, e});
          ASSERT_TRUE(fresh) << "slot " << slot << " holds two live entries";
        }
      }
      ASSERT_EQ(held + kv.num_free_pages(g), kv.num_pages(g));
    }
  }
};

void random_schedule(const model::ModelConfig& config, int block, uint64_t seed) {
  dsa::test::Rng rng(seed);
  KvManagerOptions opt;
  opt.num_blocks = rng.randint(4, 40);
  opt.max_requests = static_cast<int>(rng.randint(1, 8));
  opt.max_step_tokens = rng.randint(1, 600);
  KvManager kv(test::reqs_of(config, block), opt);
  SCOPED_TRACE(::testing::Message() << config.name << " block " << block << " seed " << seed << " blocks "
                                    << opt.num_blocks << " max_requests " << opt.max_requests << " max_step_tokens "
                                    << opt.max_step_tokens);
  Checker check(kv);
  std::map<RequestId, int64_t> target;
  RequestId next_id = 1000;
  int steps = 0, ooms = 0, finished = 0;
  for (int it = 0; it < 300; ++it) {
    // Finished requests leave (some only a few steps later).
    for (auto t = target.begin(); t != target.end();) {
      if (kv.num_cached(t->first) == t->second && rng.uniform() < 0.7) {
        kv.release(t->first);
        check.forget(t->first);
        t = target.erase(t);
        ++finished;
      } else {
        ++t;
      }
    }
    while (kv.num_requests() < opt.max_requests && rng.uniform() < 0.3) {
      kv.add_request(next_id);
      check.cached[next_id] = 0;
      check.trimmed[next_id] = 0;
      target[next_id++] = rng.randint(1, 1500);
    }
    std::vector<RequestId> ids;
    for (const auto& [id, _] : target) ids.push_back(id);
    std::shuffle(ids.begin(), ids.end(), rng.gen());
    Batch b;
    int64_t budget = opt.max_step_tokens;
    for (RequestId id : ids) {
      const int64_t left = target[id] - kv.num_cached(id);
      if (left == 0 || budget == 0 || rng.uniform() < 0.2) continue;
      const int64_t n = std::min({left, budget, rng.uniform() < 0.5 ? int64_t{1} : rng.randint(1, 400)});
      b.add_positions(id, kv.num_cached(id), n);
      budget -= n;
    }
    if (b.empty()) continue;
    const KvDemand d = kv.demand(b);
    for (size_t g = 0; g < kv.groups().size(); ++g) {
      if (kv.groups()[g].window > 0) {
        ASSERT_LE(d.needed[g], d.available[g]) << "window group ran short";
      }
    }
    if (!d.fits()) {
      ++ooms;
      std::vector<int64_t> free_before;
      for (size_t g = 0; g < kv.groups().size(); ++g) free_before.push_back(kv.num_free_pages(static_cast<int>(g)));
      EXPECT_THROW(kv.prepare(b), KvOutOfMemory);
      for (size_t g = 0; g < kv.groups().size(); ++g)
        ASSERT_EQ(kv.num_free_pages(static_cast<int>(g)), free_before[g]);
      for (const auto& [id, len] : check.cached) ASSERT_EQ(kv.num_cached(id), len);
      // Preempt the request holding the most tokens.
      RequestId victim = ids[0];
      for (RequestId id : ids)
        if (kv.num_cached(id) > kv.num_cached(victim)) victim = id;
      kv.release(victim);
      check.forget(victim);
      target.erase(victim);
      ASSERT_NO_FATAL_FAILURE(check.check_state());
      continue;
    }
    BatchMetadata m = kv.prepare(b);
    ++steps;
    ASSERT_NO_FATAL_FAILURE(check.after_step(b, m));
  }
  for (const auto& [id, _] : target) kv.release(id);
  for (size_t g = 0; g < kv.groups().size(); ++g)
    EXPECT_EQ(kv.num_free_pages(static_cast<int>(g)), kv.num_pages(static_cast<int>(g)));
  EXPECT_GT(steps, 0);
  ::testing::Test::RecordProperty("steps", steps);
  std::printf("%s block %d seed %llu (blocks %lld, max_requests %d, max_step_tokens %lld): %d steps, %d out-of-memory "
              "preemptions, %d finished\n",
              config.name.c_str(), block, static_cast<unsigned long long>(seed),
              static_cast<long long>(opt.num_blocks), opt.max_requests, static_cast<long long>(opt.max_step_tokens),
              steps, ooms, finished);
}

TEST(KvSchedule, RandomDeepseekV4Block256) {
  const uint64_t seed = dsa::test::test_seed();
  for (uint64_t i = 0; i < 6; ++i) random_schedule(test::tiny_v4({0, 4, 128, 4}), 256, seed + i);
}

TEST(KvSchedule, RandomDeepseekV4Block64) {
  const uint64_t seed = dsa::test::test_seed();
  for (uint64_t i = 0; i < 6; ++i) random_schedule(test::tiny_v4({0, 4, 4}), 64, seed + i);
}

TEST(KvSchedule, RandomGlm) {
  const uint64_t seed = dsa::test::test_seed();
  for (uint64_t i = 0; i < 6; ++i) random_schedule(test::tiny_glm({"full", "shared"}), 64, seed + i);
}

}  // namespace
}  // namespace dsa::kv
