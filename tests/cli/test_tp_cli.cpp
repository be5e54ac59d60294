// --tensor-parallel-size through the `dsa` binary (docs/parallelism.md): `dsa generate` over 2
// ranks of a tiny GLM whose shards divide (intermediate 512, no discrete choice left) runs and
// gives the ids of one rank, and so does a tiny DeepSeek-V4 (4 output groups, expert slices of
// 128); `dsa bench decode` reports the all-reduce payload per step; sizes
// that cannot shard the model and options that cannot run with it end with "dsa: error:" naming
// the value, exit code 1.
#include <unistd.h>

#include <filesystem>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/cli_run.h"
#include "dsa/model/checkpoint_tiny.h"
#include "dsa/parallel/tcp_socket.h"

namespace dsa::test {
namespace {

namespace fs = std::filesystem;

#define EXPECT_HAS(haystack, needle) EXPECT_NE(std::string(haystack).find(needle), std::string::npos) << (haystack)

struct Checkpoints {
  fs::path root = fs::temp_directory_path() / ("dsa_cli_tp_" + std::to_string(::getpid()));
  std::string glm, stock_glm, v4, v4_tp;
  Checkpoints() {
    fs::remove_all(root);
    TinyOptions o;
    o.arch = "glm_moe_dsa";
    o.seed = 1;
    stock_glm = (root / "stock_glm").string();
    make_tiny_checkpoint(o, stock_glm);
    o.intermediate = 512;  // 2 ranks hold 256 of every intermediate dim
    glm = (root / "glm").string();
    make_tiny_checkpoint(o, glm);
    const fs::path cfg_path = root / "glm" / "config.json";
    nlohmann::json cfg = nlohmann::json::parse(std::ifstream(cfg_path));
    cfg["index_topk"] = 64;  // every key of the prompts below: no indexer choice, as no router choice
    cfg["num_experts_per_tok"] = cfg.at("n_routed_experts");
    std::ofstream(cfg_path) << cfg.dump(2);
    o = TinyOptions{};
    o.arch = "deepseek_v4";
    o.seed = 1;
    v4 = (root / "v4").string();
    make_tiny_checkpoint(o, v4);
    // 4 heads in 4 output groups, expert slices of 128 for 2 ranks; no router or indexer choice.
    schema::DeepseekV4Dims d = tiny_deepseek_v4_dims();
    d.o_groups = 4;
    d.moe_inter = 256;
    d.experts_per_tok = d.experts;
    o.v4_dims = d;
    v4_tp = (root / "v4_tp").string();
    make_tiny_checkpoint(o, v4_tp);
    const fs::path v4_cfg = root / "v4_tp" / "config.json";
    cfg = nlohmann::json::parse(std::ifstream(v4_cfg));
    cfg["index_topk"] = 64;
    std::ofstream(v4_cfg) << cfg.dump(2);
  }
  ~Checkpoints() { fs::remove_all(root); }
};

const Checkpoints& dirs() {
  static Checkpoints c;
  return c;
}

// The ids of a "ids: 1,2,3" line.
std::vector<int> ids_of(const std::string& out) {
  std::vector<int> v;
  const size_t a = out.find("ids: ");
  if (a == std::string::npos) return v;
  std::istringstream in(out.substr(a + 5, out.find('\n', a) - a - 5));
  std::string item;
  while (std::getline(in, item, ',')) v.push_back(std::stoi(item));
  return v;
}

// The gap between the two best logits of every step of `--show-top 2` ("step k: a (x), b (y)").
std::vector<float> top2_gaps(const std::string& out) {
  std::vector<float> g;
  std::istringstream in(out);
  std::string line;
  while (std::getline(in, line)) {
    int k = 0, a = 0, b = 0;
    float x = 0, y = 0;
    if (std::sscanf(line.c_str(), "step %d: %d (%f), %d (%f)", &k, &a, &x, &b, &y) == 5) g.push_back(x - y);
  }
  return g;
}

void expect_clean_error(const CliResult& r, const std::string& part) {
  EXPECT_EQ(r.rc, 1) << r.out;
  EXPECT_HAS(r.out, "dsa: error: " + part);
}

// `flags`: more options of the TP = 2 run (--enable-expert-parallel).
void expect_generate_over_two_ranks(const std::string& dir, const std::string& flags = "") {
  const std::string gen = "generate --model " + dir + " --prompt-ids 5,9,2,7,11,3 --max-tokens 6";
  const CliResult one = run_dsa(gen + " --show-top 2");  // the whole model, with each step's two best logits
  ASSERT_EQ(one.rc, 0) << one.out;
  const CliResult two = run_dsa(gen + " --tensor-parallel-size 2" + flags);
  ASSERT_EQ(two.rc, 0) << two.out;
  EXPECT_HAS(two.out, "on cpu x 2 ranks");
  // The greedy ids of TP = 2 are those of the whole model up to a near tie: the ranks' bf16
  // rounding of partial sums moves logits by a few hundredths (docs/parallelism.md), so a flip is
  // allowed only where the whole model's two best logits are within 0.1, and ends the comparison.
  const std::vector<int> want = ids_of(one.out), have = ids_of(two.out);
  const std::vector<float> gaps = top2_gaps(one.out);
  ASSERT_EQ(want.size(), 6u) << one.out;
  ASSERT_EQ(have.size(), 6u) << two.out;
  ASSERT_EQ(gaps.size(), 6u) << one.out;
  for (size_t k = 0; k < want.size(); ++k)
    if (have[k] != want[k]) {
      std::printf("token %zu: tp 2 picked %d, the whole model %d (top-2 gap %.5f)\n", k, have[k], want[k], gaps[k]);
      EXPECT_LE(gaps[k], 0.1f) << "token " << k << ": a flip without a near tie\n" << one.out << two.out;
      break;
    }
}

TEST(TensorParallelCli, GenerateOverTwoRanks) {
  DSA_REQUIRE_DSA_BINARY();
  expect_generate_over_two_ranks(dirs().glm);
}

TEST(TensorParallelCli, DeepseekV4GenerateOverTwoRanks) {
  DSA_REQUIRE_DSA_BINARY();
  expect_generate_over_two_ranks(dirs().v4_tp);
}

TEST(TensorParallelCli, GenerateOverTwoExpertParallelRanks) {
  DSA_REQUIRE_DSA_BINARY();
  expect_generate_over_two_ranks(dirs().glm, " --enable-expert-parallel");
  expect_generate_over_two_ranks(dirs().v4_tp, " --enable-expert-parallel");
}

// --speculative-tokens over two in-process ranks (the MTP layer sharded as the others): the greedy
// ids of the same ranks decoding without drafts.
TEST(TensorParallelCli, GenerateWithDraftsOverTwoRanks) {
  DSA_REQUIRE_DSA_BINARY();
  for (const std::string& dir : {dirs().glm, dirs().v4_tp}) {
    const std::string gen =
        "generate --model " + dir + " --prompt-ids 5,9,2,7,11,3 --max-tokens 8 --tensor-parallel-size 2";
    const CliResult plain = run_dsa(gen);
    ASSERT_EQ(plain.rc, 0) << plain.out;
    const CliResult spec = run_dsa(gen + " --speculative-tokens 2");
    ASSERT_EQ(spec.rc, 0) << spec.out;
    EXPECT_EQ(ids_of(spec.out), ids_of(plain.out)) << spec.out << plain.out;
    EXPECT_EQ(ids_of(spec.out).size(), 8u) << spec.out;
  }
}

TEST(TensorParallelCli, BenchDecodeReportsTheAllReduce) {
  DSA_REQUIRE_DSA_BINARY();
  const CliResult r = run_dsa("bench decode --model " + dirs().glm +
                              " --on cpu --batch 2 --context 8 --quick --tensor-parallel-size 2");
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_HAS(r.out, "allreduce_KB");
  const CliResult v4 = run_dsa("bench decode --model " + dirs().v4_tp +
                               " --on cpu --batch 2 --context 8 --quick --tensor-parallel-size 2");
  ASSERT_EQ(v4.rc, 0) << v4.out;
  EXPECT_HAS(v4.out, "allreduce_KB");
  expect_clean_error(run_dsa("bench decode --model " + dirs().glm +
                             " --on cpu --batch 1 --context 8 --graphs on --tensor-parallel-size 2"),
                     "bench decode: --graphs on with --tensor-parallel-size 2");
}

TEST(TensorParallelCli, BadSizesAreCleanErrors) {
  DSA_REQUIRE_DSA_BINARY();
  const std::string gen = " --prompt-ids 2,3,4 --max-tokens 2";
  for (const char* bad : {"0", "-1"})
    expect_clean_error(run_dsa("generate --model " + dirs().glm + gen + " --tensor-parallel-size " + bad),
                       std::string("tensor parallel size (--tensor-parallel-size) must be >= 1, got ") + bad);
  expect_clean_error(run_dsa("generate --model " + dirs().glm + gen + " --tensor-parallel-size 3"),
                     "tensor parallel size (--tensor-parallel-size) 3 does not divide num_attention_heads (4)");
  // The stock tiny V4: 2 output groups, expert intermediate size 128.
  expect_clean_error(run_dsa("generate --model " + dirs().v4 + gen + " --tensor-parallel-size 4"),
                     "tensor parallel size (--tensor-parallel-size) 4 does not divide o_groups (2)");
  expect_clean_error(run_dsa("generate --model " + dirs().v4 + gen + " --tensor-parallel-size 2"),
                     "tensor parallel size (--tensor-parallel-size) 2: moe_intermediate_size 128 / 2 = 64 is not a "
                     "multiple of 128");
  // The stock tiny GLM: its intermediate sizes leave 2 ranks 64 of the experts' (not a multiple of 128).
  expect_clean_error(run_dsa("generate --model " + dirs().stock_glm + gen + " --tensor-parallel-size 2"),
                     "rank 0 of 2: tensor parallel size 2: layer 1 routed experts intermediate size 128 / 2 = 64");
  expect_clean_error(run_dsa("generate --model " + dirs().glm + gen + " --tensor-parallel-size 2 --show-top 3"),
                     "generate: --show-top runs one model without the engine");
  expect_clean_error(run_dsa("bench decode --model " + dirs().glm +
                             " --on cpu --batch 1 --context 8 --tensor-parallel-size 3"),
                     "tensor parallel size (--tensor-parallel-size) 3 does not divide");
  expect_clean_error(run_dsa("generate --model " + dirs().glm + gen + " --enable-expert-parallel"),
                     "--enable-expert-parallel splits the experts over tensor-parallel ranks: it needs "
                     "--tensor-parallel-size above 1");
  expect_clean_error(run_dsa("bench decode --model " + dirs().glm +
                             " --on cpu --batch 1 --context 8 --enable-expert-parallel"),
                     "--enable-expert-parallel splits the experts over tensor-parallel ranks");
#ifdef DSA_TEST_HAVE_SERVER
  expect_clean_error(run_dsa("serve --model " + dirs().glm + " --port 0 --no-tokenizer --tensor-parallel-size 3"),
                     "tensor parallel size (--tensor-parallel-size) 3 does not divide num_attention_heads (4)");
  expect_clean_error(run_dsa("serve --model " + dirs().v4 + " --port 0 --no-tokenizer --tensor-parallel-size 4"),
                     "tensor parallel size (--tensor-parallel-size) 4 does not divide o_groups (2)");
#endif
}

// A free loopback port (bound and released: another process could take it in between, which the
// test would then report as a failed start-up, not a wrong result).
int free_port() {
  parallel::TcpListener l({"127.0.0.1", 0});
  return l.port();
}

// --nnodes 2: two `dsa generate` processes, one rank each, joined over loopback, give the ids of
// the in-process --tensor-parallel-size 2 run exactly (both sum the ranks' partials in f32 in
// rank order); the process of rank 1 says how many steps it served.
TEST(TensorParallelCli, GenerateOverTwoProcesses) {
  DSA_REQUIRE_DSA_BINARY();
  const std::string gen = "generate --model " + dirs().glm + " --prompt-ids 5,9,2,7,11,3 --max-tokens 6";
  const CliResult threads = run_dsa(gen + " --tensor-parallel-size 2");
  ASSERT_EQ(threads.rc, 0) << threads.out;
  const std::string dist = gen + " --tensor-parallel-size 2 --nnodes 2 --dist-timeout 120 --dist-init-addr 127.0.0.1:" +
                           std::to_string(free_port()) + " --node-rank ";
  CliResult follower;
  std::thread t([&] { follower = run_dsa(dist + "1"); });
  const CliResult lead = run_dsa(dist + "0");
  t.join();
  ASSERT_EQ(lead.rc, 0) << lead.out << follower.out;
  ASSERT_EQ(follower.rc, 0) << follower.out;
  EXPECT_EQ(ids_of(lead.out), ids_of(threads.out)) << lead.out << threads.out;
  EXPECT_EQ(ids_of(lead.out).size(), 6u) << lead.out;
  EXPECT_HAS(follower.out, "rank 1 of 2: rank 0 stopped the group after");
  EXPECT_TRUE(ids_of(follower.out).empty()) << follower.out;
}

TEST(TensorParallelCli, BadProcessSetUpsAreCleanErrors) {
  DSA_REQUIRE_DSA_BINARY();
  const std::string gen = "generate --model " + dirs().glm + " --prompt-ids 2,3,4 --max-tokens 2";
  expect_clean_error(run_dsa(gen + " --nnodes 2 --dist-init-addr 127.0.0.1:1"),
                     "--nnodes 2 runs one tensor-parallel rank per process: --tensor-parallel-size must equal it (got 1)");
  expect_clean_error(run_dsa(gen + " --tensor-parallel-size 2 --nnodes 2 --node-rank 2 --dist-init-addr 127.0.0.1:1"),
                     "--node-rank 2 is outside 0..1 (--nnodes 2)");
  expect_clean_error(run_dsa(gen + " --tensor-parallel-size 2 --nnodes 2"),
                     "--nnodes 2 needs --dist-init-addr HOST:PORT");
  expect_clean_error(run_dsa(gen + " --tensor-parallel-size 2 --nnodes 2 --dist-init-addr localhost"),
                     "--dist-init-addr 'localhost' must be HOST:PORT");
  expect_clean_error(run_dsa(gen + " --node-rank 1"), "--node-rank / --dist-init-addr need --nnodes above 1");
  expect_clean_error(run_dsa(gen + " --tensor-parallel-size 2 --nnodes 2 --node-rank 0 --speculative-tokens 1 "
                                   "--dist-init-addr 127.0.0.1:1"),
                     "--speculative-tokens 1 with --nnodes 2: speculative decoding runs with the tensor-parallel ranks "
                     "of one process only");
  // A rank 1 whose rank 0 never comes: a bounded wait, then an error naming the address.
  expect_clean_error(run_dsa(gen + " --tensor-parallel-size 2 --nnodes 2 --node-rank 1 --dist-timeout 1 "
                                   "--dist-init-addr 127.0.0.1:" + std::to_string(free_port())),
                     "could not connect to 127.0.0.1:");
  // Rank 1 started for another model than rank 0: refused on both, naming the field.
  const std::string addr = " --dist-timeout 60 --dist-init-addr 127.0.0.1:" + std::to_string(free_port());
  CliResult other;
  std::thread t([&] {
    other = run_dsa("generate --model " + dirs().v4_tp + " --prompt-ids 2,3,4 --max-tokens 2 --tensor-parallel-size 2 "
                    "--nnodes 2 --node-rank 1" + addr);
  });
  const CliResult lead = run_dsa(gen + " --tensor-parallel-size 2 --nnodes 2 --node-rank 0" + addr);
  t.join();
  expect_clean_error(lead, "tensor-parallel start-up refused: rank 1 does not match rank 0");
  EXPECT_HAS(lead.out, "arch: 'glm_moe_dsa' vs 'deepseek_v4'");
  expect_clean_error(other, "tensor-parallel start-up refused by rank 0: rank 1 does not match rank 0");
}

}  // namespace
}  // namespace dsa::test
