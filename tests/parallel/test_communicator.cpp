// The in-process communicator: collectives over 1-4 ranks (threads) against host sums in rank
// order, bitwise determinism whatever the thread timing, misuse errors, the abort path; NCCL's
// build switch (and world size 1 on a GPU).
#include <atomic>
#include <chrono>
#include <cstring>
#include <random>
#include <thread>

#include <gtest/gtest.h>

#include "common/testing.h"
#include "dsa/core/cuda_memory.h"
#include "dsa/core/dtype_conv.h"
#include "dsa/parallel/in_process_group.h"
#include "dsa/parallel/nccl_communicator.h"
#include "dsa/parallel/rank_threads.h"

namespace dsa::parallel {
namespace {

using test::error_of;

// Rank r's input: seeded per rank, so the expected sum can be built on the host.
Tensor rank_input(uint64_t seed, int r, const Shape& shape) {
  test::Rng rng(seed * 1000 + static_cast<uint64_t>(r));
  return test::random_f32(shape, rng);
}

Tensor host_sum(uint64_t seed, int n, const Shape& shape) {
  Tensor s = Tensor::zeros(shape, DType::F32);
  for (int r = 0; r < n; ++r) {
    const Tensor x = rank_input(seed, r, shape);
    for (int64_t i = 0; i < s.numel(); ++i) s.data<float>()[i] += x.data<float>()[i];
  }
  return s;
}

Tensor to_bf16(const Tensor& f) {
  Tensor b = Tensor::empty(f.shape(), DType::BF16);
  for (int64_t i = 0; i < f.numel(); ++i) b.data<uint16_t>()[i] = f32_to_bf16_bits(f.data<float>()[i]);
  return b;
}

bool same_bytes(const Tensor& a, const Tensor& b) {
  return a.nbytes() == b.nbytes() && std::memcmp(a.raw(), b.raw(), a.nbytes()) == 0;
}

class Sizes : public ::testing::TestWithParam<int> {};

TEST_P(Sizes, AllReduceSumF32IsTheRankOrderSum) {
  const int n = GetParam();
  const uint64_t seed = test::test_seed();
  const Shape shape{7, 13};  // 91 elements: stripes of unequal length
  InProcessGroup g(n);
  std::vector<Tensor> out(static_cast<size_t>(n));
  run_ranks(g, [&](Communicator& c) {
    EXPECT_EQ(c.size(), n);
    Tensor t = rank_input(seed, c.rank(), shape);
    c.all_reduce_sum(t);
    out[static_cast<size_t>(c.rank())] = t;
  });
  const Tensor want = host_sum(seed, n, shape);
  for (int r = 0; r < n; ++r) EXPECT_TRUE(same_bytes(out[static_cast<size_t>(r)], want)) << "rank " << r;
  EXPECT_EQ(g.rank(0).collective_bytes(), want.nbytes());
}

TEST_P(Sizes, AllReduceSumBf16RoundsTheF32SumOnce) {
  const int n = GetParam();
  const uint64_t seed = test::test_seed();
  const Shape shape{3, 33};
  InProcessGroup g(n);
  std::vector<Tensor> out(static_cast<size_t>(n));
  run_ranks(g, [&](Communicator& c) {
    Tensor t = to_bf16(rank_input(seed, c.rank(), shape));
    c.all_reduce_sum(t);
    out[static_cast<size_t>(c.rank())] = t;
  });
  // The f32 sum of the bf16 inputs, in rank order, rounded once.
  Tensor s = Tensor::zeros(shape, DType::F32);
  for (int r = 0; r < n; ++r) {
    const Tensor b = to_bf16(rank_input(seed, r, shape));
    for (int64_t i = 0; i < s.numel(); ++i) s.data<float>()[i] += bf16_bits_to_f32(b.data<uint16_t>()[i]);
  }
  const Tensor want = to_bf16(s);
  for (int r = 0; r < n; ++r) EXPECT_TRUE(same_bytes(out[static_cast<size_t>(r)], want)) << "rank " << r;
}

TEST_P(Sizes, AllGatherConcatenatesInRankOrder) {
  const int n = GetParam();
  InProcessGroup g(n);
  std::vector<Tensor> out(static_cast<size_t>(n));
  run_ranks(g, [&](Communicator& c) {
    Tensor in = Tensor::empty({2, 3}, DType::I32);
    for (int i = 0; i < 6; ++i) in.data<int32_t>()[i] = c.rank() * 100 + i;
    Tensor o = Tensor::empty({2 * n, 3}, DType::I32);
    c.all_gather(in, o);
    out[static_cast<size_t>(c.rank())] = o;
  });
  for (int r = 0; r < n; ++r)
    for (int q = 0; q < n; ++q)
      for (int i = 0; i < 6; ++i) EXPECT_EQ(out[static_cast<size_t>(r)].data<int32_t>()[q * 6 + i], q * 100 + i);
}

TEST_P(Sizes, BroadcastTensorsAndBytesFromEveryRoot) {
  const int n = GetParam();
  InProcessGroup g(n);
  for (int root = 0; root < n; ++root) {
    run_ranks(g, [&](Communicator& c) {
      Tensor t = Tensor::empty({5}, DType::F32);
      for (int i = 0; i < 5; ++i) t.data<float>()[i] = static_cast<float>(c.rank() * 10 + i);
      c.broadcast(t, root);
      for (int i = 0; i < 5; ++i) EXPECT_EQ(t.data<float>()[i], static_cast<float>(root * 10 + i)) << "rank " << c.rank();
      std::string msg = c.rank() == root ? "step inputs of the root" : std::string(23, '?');
      c.broadcast_bytes(msg.data(), msg.size(), root);
      EXPECT_EQ(msg, "step inputs of the root");
    });
  }
}

TEST_P(Sizes, BarrierWaitsForEveryRank) {
  const int n = GetParam();
  InProcessGroup g(n);
  std::atomic<int> before{0};
  run_ranks(g, [&](Communicator& c) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5 * c.rank()));
    ++before;
    c.barrier();
    EXPECT_EQ(before.load(), n) << "rank " << c.rank() << " left the barrier early";
  });
}

INSTANTIATE_TEST_SUITE_P(Ranks, Sizes, ::testing::Values(1, 2, 3, 4));

TEST(InProcessGroup, ReductionBitsDoNotDependOnThreadTiming) {
  const uint64_t seed = test::test_seed();
  const int n = 4;
  const Shape shape{64, 17};
  Tensor first;
  std::mt19937 jitter(static_cast<uint32_t>(seed));
  for (int rep = 0; rep < 20; ++rep) {
    InProcessGroup g(n);
    std::vector<int> delay_us(n);
    for (int& d : delay_us) d = static_cast<int>(jitter() % 2000);
    Tensor got;
    run_ranks(g, [&](Communicator& c) {
      Tensor t = rank_input(seed, c.rank(), shape);
      std::this_thread::sleep_for(std::chrono::microseconds(delay_us[static_cast<size_t>(c.rank())]));
      c.all_reduce_sum(t);
      c.all_reduce_sum(t);  // twice: the second sums identical copies, in rank order again
      if (c.rank() == 2) got = t;
    });
    if (rep == 0) first = got;
    ASSERT_TRUE(same_bytes(got, first)) << "repetition " << rep;
  }
}

TEST(InProcessGroup, AFailingRankStopsTheOthersWithItsReason) {
  InProcessGroup g(3);
  std::vector<std::string> seen(3);
  const std::string err = error_of([&] {
    run_ranks(g, [&](Communicator& c) {
      if (c.rank() == 1) throw Error("weights of layer 2 are missing");
      Tensor t = Tensor::zeros({4}, DType::F32);
      try {
        c.all_reduce_sum(t);  // waits for rank 1, which never comes
      } catch (const Error& e) {
        seen[static_cast<size_t>(c.rank())] = e.what();
        throw;
      }
    });
  });
  EXPECT_EQ(err, "rank 1 of 3: weights of layer 2 are missing");
  for (int r : {0, 2}) {
    EXPECT_NE(seen[static_cast<size_t>(r)].find("all_reduce_sum on rank " + std::to_string(r)), std::string::npos)
        << seen[static_cast<size_t>(r)];
    EXPECT_NE(seen[static_cast<size_t>(r)].find("rank 1 failed: weights of layer 2 are missing"), std::string::npos)
        << seen[static_cast<size_t>(r)];
  }
  EXPECT_TRUE(g.aborted());
  EXPECT_EQ(g.aborted_by(), 1);
  // Every later collective fails at once.
  EXPECT_NE(error_of([&] { g.rank(0).barrier(); }).find("rank 1 failed"), std::string::npos);
}

// RankThreads: the same results as run_ranks, every rank on the same thread run after run (rank
// 0 on the caller's), and a failing rank reported the same way; the group then stays stopped.
TEST(RankThreads, RanksKeepTheirThreadsAcrossRuns) {
  const uint64_t seed = test::test_seed();
  const int n = 3;
  InProcessGroup g(n);
  RankThreads threads(g);
  std::vector<std::thread::id> first(n);
  const Shape shape{5, 7};
  const Tensor want = host_sum(seed, n, shape);
  for (int run = 0; run < 50; ++run) {
    std::vector<std::thread::id> ids(n);
    std::vector<Tensor> out(n);
    threads.run([&](Communicator& c) {
      ids[static_cast<size_t>(c.rank())] = std::this_thread::get_id();
      Tensor t = rank_input(seed, c.rank(), shape);
      c.all_reduce_sum(t);
      out[static_cast<size_t>(c.rank())] = t;
    });
    if (run == 0) first = ids;
    EXPECT_EQ(ids, first) << "run " << run;
    EXPECT_EQ(ids[0], std::this_thread::get_id());
    for (int r = 0; r < n; ++r) EXPECT_TRUE(same_bytes(out[static_cast<size_t>(r)], want)) << "run " << run << " rank " << r;
  }
  EXPECT_NE(first[1], first[2]);
  const std::string err = error_of([&] {
    threads.run([&](Communicator& c) {
      if (c.rank() == 2) throw Error("rank two gave up");
      c.barrier();
    });
  });
  EXPECT_EQ(err, "rank 2 of 3: rank two gave up");
  EXPECT_NE(error_of([&] { threads.run([&](Communicator& c) { c.barrier(); }); }).find("rank 2 failed"),
            std::string::npos);
}

TEST(InProcessGroup, ARankThatNeverArrivesTimesOut) {
  InProcessOptions o;
  o.timeout = std::chrono::milliseconds(200);
  InProcessGroup g(2, o);
  const std::string err = error_of([&] {
    run_ranks(g, [&](Communicator& c) {
      if (c.rank() == 0) c.barrier();  // rank 1 returns without joining
    });
  });
  EXPECT_EQ(err, "rank 0 of 2: barrier on rank 0 of 2 (in-process group) stopped: rank 0 waited 200 ms in barrier "
                 "for rank(s) 1 that never arrived");
}

TEST(InProcessGroup, MismatchedShapesNameTheOpRanksAndShapes) {
  InProcessGroup g(2);
  const std::string err = error_of([&] {
    run_ranks(g, [&](Communicator& c) {
      Tensor t = Tensor::zeros({4, c.rank() == 0 ? 8 : 9}, DType::F32);
      c.all_reduce_sum(t);
    });
  });
  EXPECT_NE(err.find("ranks disagree: rank 0 called all_reduce_sum f32[4, 8], rank 1 called all_reduce_sum f32[4, 9]"),
            std::string::npos)
      << err;
}

TEST(InProcessGroup, RanksInDifferentCollectivesFail) {
  InProcessGroup g(2);
  const std::string err = error_of([&] {
    run_ranks(g, [&](Communicator& c) {
      Tensor t = Tensor::zeros({2}, DType::BF16);
      if (c.rank() == 0) c.all_reduce_sum(t);
      else c.broadcast(t, 0);
    });
  });
  EXPECT_NE(err.find("rank 0 called all_reduce_sum bf16[2], rank 1 called broadcast bf16[2] root 0"), std::string::npos)
      << err;
}

TEST(InProcessGroup, BadArgumentsAreRefusedBeforeTheExchange) {
  InProcessGroup g(1);
  Communicator& c = g.rank(0);
  Tensor i = Tensor::zeros({3}, DType::I32);
  EXPECT_EQ(error_of([&] { c.all_reduce_sum(i); }), "all_reduce_sum: i32[3] cpu must be f32 or bf16");
  Tensor f = Tensor::zeros({4, 4}, DType::F32);
  EXPECT_EQ(error_of([&] { c.all_reduce_sum(f.slice(1, 0, 2)); }).find("must be contiguous") != std::string::npos, true);
  Tensor o = Tensor::zeros({3, 4}, DType::F32);
  EXPECT_NE(error_of([&] { c.all_gather(f, o); }).find("out is f32[3, 4]"), std::string::npos);
  EXPECT_NE(error_of([&] { c.broadcast(f, 1); }).find("root 1 is not a rank of a group of 1"), std::string::npos);
  EXPECT_EQ(error_of([] { InProcessGroup bad(0); }), "in-process group: size 0 must be at least 1");
  EXPECT_FALSE(g.aborted()) << "argument errors are the caller's; the group stays usable";
}

TEST(Nccl, BuildSwitch) {
  if (!nccl_available()) {
    EXPECT_NE(error_of([] { nccl_unique_id(); }).find("built without NCCL"), std::string::npos);
    EXPECT_NE(error_of([] { make_nccl_communicator(0, 1, {}, 0); }).find("built without NCCL"), std::string::npos);
    GTEST_SKIP() << "built without NCCL: the stubs say so";
  }
  DSA_REQUIRE_CUDA();
  // World size 1: init from a unique id, an all-reduce (the identity) and a barrier.
  auto c = make_nccl_communicator(0, 1, nccl_unique_id(), 0);
  EXPECT_EQ(c->size(), 1);
  EXPECT_STREQ(c->kind(), "nccl");
  Tensor h = Tensor::empty({8}, DType::F32);
  for (int i = 0; i < 8; ++i) h.data<float>()[i] = static_cast<float>(i) - 3.5f;
  Tensor d = h.to(Device::cuda(0));
  c->all_reduce_sum(d);
  c->barrier();
  EXPECT_TRUE(same_bytes(d.to(Device::cpu()), h));
}

}  // namespace
}  // namespace dsa::parallel
