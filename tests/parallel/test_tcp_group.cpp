// The TCP group (parallel/tcp_group.h): ranks joined over loopback give the in-process group's
// bits for every collective; the start-up refuses mismatched fingerprints, world sizes, duplicate
// ranks and strangers on every rank with a named reason; a rank that never comes, stops calling
// or dies makes the others stop with an error naming it, within the timeouts. Ranks are threads
// here (each with its own sockets, exactly the multi-process path) and, once, a forked process.
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <functional>
#include <thread>

#include <gtest/gtest.h>

#include "common/testing.h"
#include "dsa/core/dtype_conv.h"
#include "dsa/parallel/in_process_group.h"
#include "dsa/parallel/rank_threads.h"
#include "dsa/parallel/tcp_group.h"

namespace dsa::parallel {
namespace {

using namespace std::chrono_literals;
using test::error_of;

const HostPort kLoopback{"127.0.0.1", 0};

TcpGroupOptions quick(std::chrono::milliseconds timeout = 5000ms) {
  TcpGroupOptions o;
  o.startup_timeout = timeout;
  o.timeout = timeout;
  o.fingerprint = "dsa=test\nmodel=tiny";
  return o;
}

// Runs fn(rank, comm) on `n` ranks (threads) joined through one listener; returns each rank's
// error text ("" when it returned normally). opts(r) gives rank r's options.
std::vector<std::string> run_tcp(int n, const std::function<TcpGroupOptions(int)>& opts,
                                 const std::function<void(int, Communicator&)>& fn,
                                 const std::function<int(int)>& claim = nullptr) {
  TcpListener l(kLoopback);
  const HostPort at{"127.0.0.1", l.port()};
  std::vector<std::string> errs(static_cast<size_t>(n));
  std::vector<std::thread> ts;
  for (int r = 0; r < n; ++r)
    ts.emplace_back([&, r] {
      try {
        const int as = claim ? claim(r) : r;
        auto c = tcp_group_join(as, n, at, opts(r), as == 0 ? &l : nullptr);
        fn(r, *c);
      } catch (const std::exception& e) {
        errs[static_cast<size_t>(r)] = e.what();
      }
    });
  for (auto& t : ts) t.join();
  return errs;
}

Tensor filled(int64_t n, float v) {
  Tensor t = Tensor::empty({n}, DType::F32);
  for (int64_t i = 0; i < n; ++i) t.data<float>()[i] = v;
  return t;
}

bool same_bytes(const Tensor& a, const Tensor& b) {
  return a.nbytes() == b.nbytes() && std::memcmp(a.raw(), b.raw(), a.nbytes()) == 0;
}

// Every collective once, recording the results; the same on the in-process group and on TCP.
struct Results {
  Tensor f32, bf16, gathered, bcast;
  std::vector<char> bytes;
};
void every_collective(uint64_t seed, Communicator& c, Results& out) {
  test::Rng rng(seed * 100 + static_cast<uint64_t>(c.rank()));
  out.f32 = test::random_f32({7, 13}, rng);
  c.all_reduce_sum(out.f32);
  out.bf16 = test::random_bf16({3, 33}, rng);
  c.all_reduce_sum(out.bf16);
  Tensor in = test::random_f32({2, 5}, rng);
  out.gathered = Tensor::empty({2 * c.size(), 5}, DType::F32);
  c.all_gather(in, out.gathered);
  out.bcast = test::random_bf16({4, 9}, rng);
  c.broadcast(out.bcast, c.size() - 1);
  out.bytes.assign(37, static_cast<char>(c.rank() + 1));
  c.broadcast_bytes(out.bytes.data(), out.bytes.size(), 0);
  c.barrier();
}

TEST(TcpGroup, EveryCollectiveGivesTheInProcessGroupsBits) {
  const uint64_t seed = test::test_seed();
  for (int n : {1, 2, 3}) {
    std::vector<Results> want(static_cast<size_t>(n)), got(static_cast<size_t>(n));
    InProcessGroup g(n);
    run_ranks(g, [&](Communicator& c) { every_collective(seed, c, want[static_cast<size_t>(c.rank())]); });
    const auto errs = run_tcp(n, [](int) { return quick(); }, [&](int r, Communicator& c) {
      EXPECT_STREQ(c.kind(), "tcp");
      EXPECT_EQ(c.rank(), r);
      EXPECT_EQ(c.size(), n);
      every_collective(seed, c, got[static_cast<size_t>(r)]);
    });
    for (int r = 0; r < n; ++r) {
      ASSERT_EQ(errs[static_cast<size_t>(r)], "") << "n=" << n << " rank " << r;
      const Results &a = want[static_cast<size_t>(r)], &b = got[static_cast<size_t>(r)];
      EXPECT_TRUE(same_bytes(a.f32, b.f32)) << "n=" << n << " rank " << r;
      EXPECT_TRUE(same_bytes(a.bf16, b.bf16)) << "n=" << n << " rank " << r;
      EXPECT_TRUE(same_bytes(a.gathered, b.gathered)) << "n=" << n << " rank " << r;
      EXPECT_TRUE(same_bytes(a.bcast, b.bcast)) << "n=" << n << " rank " << r;
      EXPECT_EQ(a.bytes, b.bytes) << "n=" << n << " rank " << r;
      EXPECT_EQ(b.bytes, std::vector<char>(37, 1));  // rank 0's
    }
  }
}

TEST(TcpGroup, AMismatchedFingerprintIsRefusedOnEveryRankNamingTheField) {
  const auto errs = run_tcp(
      3,
      [](int r) {
        TcpGroupOptions o = quick();
        o.fingerprint = r == 2 ? "dsa=test\nlayers=78\nmodel=tiny" : "dsa=test\nlayers=4\nmodel=tiny";
        return o;
      },
      [](int, Communicator&) {});
  for (const std::string& e : errs) {
    EXPECT_NE(e.find("start-up refused"), std::string::npos) << e;
    EXPECT_NE(e.find("rank 2 does not match rank 0"), std::string::npos) << e;
    EXPECT_NE(e.find("layers: '4' vs '78'"), std::string::npos) << e;
  }
}

TEST(TcpGroup, WorldSizeAndDuplicateRanksAreRefused) {
  {  // rank 1 claims rank 1 twice: one of the two joins, the other is refused, and so is the group
    const auto errs = run_tcp(3, [](int) { return quick(); }, [](int, Communicator&) {},
                              [](int r) { return r == 2 ? 1 : r; });
    for (const std::string& e : errs) EXPECT_NE(e.find("two processes joined as rank 1"), std::string::npos) << e;
  }
  {  // a rank started for another world size
    TcpListener l(kLoopback);
    const HostPort at{"127.0.0.1", l.port()};
    std::string e0, e1;
    std::thread lead([&] { e0 = error_of([&] { tcp_group_join(0, 2, at, quick(), &l); }); });
    e1 = error_of([&] { tcp_group_join(1, 3, at, quick()); });
    lead.join();
    EXPECT_NE(e0.find("rank 1 was started for a world size of 3, rank 0 for 2"), std::string::npos) << e0;
    EXPECT_NE(e1.find("refused by rank 0: rank 1 was started for a world size of 3"), std::string::npos) << e1;
  }
}

TEST(TcpGroup, ARankThatNeverComesIsNamedAfterTheStartupTimeout) {
  TcpListener l(kLoopback);
  const HostPort at{"127.0.0.1", l.port()};
  std::string e0, e1;
  const auto t0 = std::chrono::steady_clock::now();
  std::thread lead([&] { e0 = error_of([&] { tcp_group_join(0, 3, at, quick(400ms), &l); }); });
  e1 = error_of([&] { tcp_group_join(1, 3, at, quick(400ms)); });
  lead.join();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 5s);
  EXPECT_NE(e0.find("for rank(s) 2 to join"), std::string::npos) << e0;
  EXPECT_NE(e1.find("refused by rank 0"), std::string::npos) << e1;
  EXPECT_NE(e1.find("for rank(s) 2 to join"), std::string::npos) << e1;
}

TEST(TcpGroup, AStrangerOnThePortIsRefused) {
  TcpListener l(kLoopback);
  const HostPort at{"127.0.0.1", l.port()};
  std::string e0;
  std::thread lead([&] { e0 = error_of([&] { tcp_group_join(0, 2, at, quick(), &l); }); });
  TcpStream s = TcpStream::connect(at, std::chrono::steady_clock::now() + 2s);
  const char junk[32] = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
  s.send_all(junk, sizeof junk, "junk");
  lead.join();
  EXPECT_NE(e0.find("not a dsa rank"), std::string::npos) << e0;
}

TEST(TcpGroup, ARankThatDiesStopsTheOthersNamingIt) {
  const auto errs = run_tcp(3, [](int) { return quick(); }, [](int r, Communicator& c) {
    Tensor t = Tensor::zeros({4}, DType::F32);
    c.all_reduce_sum(t);  // everyone is in
    if (r == 2) return;   // rank 2 "dies": its communicator goes away, closing its connection
    c.all_reduce_sum(t);
  });
  EXPECT_EQ(errs[2], "");
  for (int r : {0, 1}) {
    EXPECT_NE(errs[static_cast<size_t>(r)].find("waiting on rank 2"), std::string::npos) << errs[static_cast<size_t>(r)];
    EXPECT_NE(errs[static_cast<size_t>(r)].find("closed the connection"), std::string::npos)
        << errs[static_cast<size_t>(r)];
  }
}

TEST(TcpGroup, RanksInDifferentCollectivesAllStopSayingSo) {
  const auto errs = run_tcp(3, [](int) { return quick(); }, [](int r, Communicator& c) {
    Tensor t = Tensor::zeros({4}, r == 1 ? DType::BF16 : DType::F32);
    c.all_reduce_sum(t);
  });
  for (const std::string& e : errs) {
    EXPECT_NE(e.find("ranks disagree: rank 0 called all_reduce_sum f32[4], rank 1 called all_reduce_sum bf16[4]"),
              std::string::npos)
        << e;
  }
}

TEST(TcpGroup, ARankThatStopsCallingTimesOutTheOthersAndLaterCallsFailAtOnce) {
  const auto errs = run_tcp(2, [](int) { return quick(300ms); }, [](int r, Communicator& c) {
    if (r == 1) {
      std::this_thread::sleep_for(1500ms);  // never calls; its connection stays open meanwhile
      return;
    }
    Tensor t = Tensor::zeros({4}, DType::F32);
    const std::string first = error_of([&] { c.all_reduce_sum(t); });
    EXPECT_NE(first.find("rank 0's all_reduce_sum waiting on rank 1: timed out"), std::string::npos) << first;
    const auto t0 = std::chrono::steady_clock::now();
    const std::string again = error_of([&] { c.barrier(); });
    EXPECT_LT(std::chrono::steady_clock::now() - t0, 100ms);
    EXPECT_NE(again.find("timed out"), std::string::npos) << again;
  });
  EXPECT_EQ(errs[0], "");
}

TEST(TcpGroup, TwoProcessesReduceOverLoopback) {
  TcpListener l(kLoopback);
  const HostPort at{"127.0.0.1", l.port()};
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {  // the child is rank 1: exit status 0 when it saw the expected sum
    int status = 1;
    try {
      auto c = tcp_group_join(1, 2, at, quick());
      Tensor t = filled(5, 2.f);
      c->all_reduce_sum(t);
      status = t.data<float>()[4] == 3.f ? 0 : 2;
    } catch (...) {
      status = 3;
    }
    _exit(status);
  }
  std::string err;
  float got = 0;
  try {
    auto c = tcp_group_join(0, 2, at, quick(), &l);
    Tensor t = filled(5, 1.f);
    c->all_reduce_sum(t);
    got = t.data<float>()[0];
  } catch (const std::exception& e) {
    err = e.what();
  }
  int status = -1;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_EQ(err, "");
  EXPECT_EQ(got, 3.f);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

TEST(TcpGroup, AddressesAreCheckedByName) {
  EXPECT_EQ(parse_host_port("10.0.0.1:29500", "--dist-init-addr").port, 29500);
  EXPECT_EQ(parse_host_port("node-a:1", "--dist-init-addr").host, "node-a");
  EXPECT_NE(error_of([] { parse_host_port("10.0.0.1", "--dist-init-addr"); }).find("--dist-init-addr '10.0.0.1' must be HOST:PORT"),
            std::string::npos);
  EXPECT_NE(error_of([] { parse_host_port("h:port", "--dist-init-addr"); }).find("port 'port' is not a number"),
            std::string::npos);
  EXPECT_NE(error_of([] { parse_host_port("h:70000", "--dist-init-addr"); }).find("outside 1-65535"), std::string::npos);
  EXPECT_NE(error_of([] { parse_host_port("h:0", "--dist-init-addr"); }).find("outside 1-65535"), std::string::npos);
  EXPECT_EQ(fingerprint_difference("a=1\nb=2", "a=1\nb=2"), "");
  EXPECT_EQ(fingerprint_difference("a=1\nb=2", "a=1\nb=3"), "b: '2' vs '3'");
  EXPECT_EQ(fingerprint_difference("a=1", "a=1\nc=0"), "c: absent vs '0'");
}

}  // namespace
}  // namespace dsa::parallel
