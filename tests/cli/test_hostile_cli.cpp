// Issue 20 through the `dsa` binary: hostile config.json numbers, symlink loops and FIFOs in
// place of files, NaN / Inf weights, and checkpoints written the way transformers writes them.
// Every command ends with "dsa: error: <what and where>" and exit code 1 (never an abort: 134,
// never a hang: 124 from the time bound), and one reader checks config.json for all of them.
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "common/cli_run.h"
#include "common/testing.h"
#include "dsa/core/dtype_conv.h"
#include "dsa/model/checkpoint.h"
#include "dsa/model/checkpoint_tiny.h"

namespace dsa::test {
namespace {

namespace fs = std::filesystem;

#define EXPECT_HAS(haystack, needle) EXPECT_NE(std::string(haystack).find(needle), std::string::npos) << (haystack)

class TempTree {
 public:
  TempTree() {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    path = fs::temp_directory_path() / ("dsa_cli_" + std::string(info ? info->name() : "x") + "_" +
                                        std::to_string(::getpid()));
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempTree() { fs::remove_all(path); }
  std::string operator/(const std::string& n) const { return (path / n).string(); }
  fs::path path;
};

std::string tiny(const TempTree& t, const std::string& name, const std::string& arch = "glm_moe_dsa") {
  TinyOptions o;
  o.arch = arch;
  o.seed = 1;
  make_tiny_checkpoint(o, t / name);
  return t / name;
}

nlohmann::json read_json(const std::string& p) { return nlohmann::json::parse(std::ifstream(p)); }
void write_text(const std::string& p, const std::string& s) { std::ofstream(p, std::ios::binary) << s; }

// The commands that read a checkpoint's config.json (serve only where the server is built: it
// would serve a valid model, here it must fail before).
std::vector<std::string> config_commands(const std::string& dir) {
  std::vector<std::string> v = {"check-model --model " + dir, "generate --model " + dir + " --prompt-ids 2,3 --max-tokens 1",
                                "select --model " + dir + " --capability none", "tune --model " + dir};
#ifdef DSA_TEST_HAVE_SERVER
  v.push_back("serve --model " + dir + " --port 0 --no-tokenizer");
#endif
  return v;
}

void expect_clean_error(const CliResult& r, const std::string& args, const std::string& part) {
  EXPECT_EQ(r.rc, 1) << args << "\n" << r.out;
  EXPECT_HAS(r.out, "dsa: error: ");
  EXPECT_HAS(r.out, part);
}

TEST(HostileCli, ConfigNumbersFailEveryCommandCleanly) {
  DSA_REQUIRE_DSA_BINARY();
  TempTree t;
  const std::string dir = tiny(t, "m");
  const std::string cfg = read_json(dir + "/config.json").dump();
  struct Case {
    std::string edit;  // replaces the closing brace
    std::string message;
  };
  const std::vector<Case> cases = {
      {R"(, "rms_norm_eps": 1e400})", "not valid JSON"},
      {R"(, "num_nextn_predict_layers": -1})", "field 'num_nextn_predict_layers' = -1: must be in 0..16"},
      {R"(, "num_hidden_layers": 1000000})", "field 'num_hidden_layers' = 1000000: must be in 1..1024"},
      {R"(, "index_topk": 1000000000})", "field 'index_topk' = 1000000000: must be in 1..65536"},
      {R"(, "hidden_size": 1e93})", "field 'hidden_size' = 1e+93: out of range"},
      {R"(, "num_experts_per_tok": 0})", "field 'num_experts_per_tok' = 0"},
      {R"(, "n_group": 0})", "field 'n_group' = 0"},
      {R"(, "rope_theta": -1})", "field 'rope.theta' = -1"},
  };
  for (const Case& c : cases) {
    // Later keys win in nlohmann's parser: append the hostile field to the object text.
    write_text(dir + "/config.json", cfg.substr(0, cfg.size() - 1) + c.edit);
    for (const std::string& args : config_commands(dir)) expect_clean_error(run_dsa(args), args, c.message);
  }
}

TEST(HostileCli, DeepseekV4SizesAreBounded) {
  DSA_REQUIRE_DSA_BINARY();
  TempTree t;
  const std::string dir = tiny(t, "v4", "deepseek_v4");
  const auto base = read_json(dir + "/config.json");
  const std::vector<std::pair<std::string, nlohmann::json>> cases = {
      {"num_nextn_predict_layers", -1},  // was std::length_error and exit 134
      {"num_nextn_predict_layers", int64_t{10000000000}},  // was a 21 GB allocation in check-model
      {"hc_sinkhorn_iters", 1000000000},                   // was a hang
      {"index_topk", 1000000000},                          // was an 8 GB allocation
      {"num_hidden_layers", 1000000},                      // was an OOM kill
  };
  for (const auto& [field, value] : cases) {
    auto j = base;
    j[field] = value;
    write_text(dir + "/config.json", j.dump());
    const std::string want = "field '" + field + "' = " + value.dump() + ": must be in ";
    for (const std::string& args : config_commands(dir)) expect_clean_error(run_dsa(args), args, want);
  }
}

TEST(HostileCli, SymlinkLoopsAndFifos) {
  DSA_REQUIRE_DSA_BINARY();
  TempTree t;
  fs::create_symlink("loop_b", t.path / "loop_a");
  fs::create_symlink("loop_a", t.path / "loop_b");
  expect_clean_error(run_dsa("check-model --model " + (t / "loop_a")), "loop dir", "Too many levels of symbolic links");
  expect_clean_error(run_dsa("generate --model " + (t / "loop_a") + " --prompt-ids 2"), "loop dir",
                     "Too many levels of symbolic links");
  // A shard that is a symlink to itself, then a FIFO: check-model ends at once with the path.
  const std::string dir = tiny(t, "m");
  std::string shard;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().filename().string().rfind("model-00001-of-", 0) == 0) shard = e.path().string();
  ASSERT_FALSE(shard.empty());
  fs::remove(shard);
  fs::create_symlink(fs::path(shard).filename(), shard);
  expect_clean_error(run_dsa("check-model --model " + dir, "", 60), "loop shard",
                     shard + ": cannot access: Too many levels of symbolic links");
  fs::remove(shard);
  ASSERT_EQ(::mkfifo(shard.c_str(), 0600), 0);
  expect_clean_error(run_dsa("check-model --model " + dir, "", 60), "fifo shard", shard + ": is a FIFO, not a regular file");
  fs::remove(dir + "/config.json");
  ASSERT_EQ(::mkfifo((dir + "/config.json").c_str(), 0600), 0);
  for (const std::string& args : config_commands(dir))
    expect_clean_error(run_dsa(args, "", 60), args, dir + "/config.json: is a FIFO, not a regular file");
  // tokenizer.json: a symlink loop, and a FIFO.
  DSA_REQUIRE_TOKENIZER();
  fs::create_directories(t.path / "tok");
  fs::create_symlink("tokenizer.json", t.path / "tok" / "tokenizer.json");
  expect_clean_error(run_dsa("tokenize --tokenizer " + (t / "tok") + " --text hi", "", 60), "loop tokenizer",
                     "Too many levels of symbolic links");
  fs::remove(t.path / "tok" / "tokenizer.json");
  ASSERT_EQ(::mkfifo((t.path / "tok" / "tokenizer.json").c_str(), 0600), 0);
  const CliResult r = run_dsa("tokenize --tokenizer " + (t / "tok") + " --text hi", "", 60);
  EXPECT_EQ(r.rc, 1) << r.out;
  EXPECT_HAS(r.out, "dsa: error: ");
}

// A copy of the tiny GLM checkpoint with one value replaced in each of a few tensors.
std::string poisoned(const TempTree& t, const std::string& src) {
  Checkpoint c = Checkpoint::open(src);
  std::vector<std::pair<std::string, Tensor>> all;
  for (const auto& n : c.names()) {
    const Tensor src = c.get(n);
    Tensor copy = Tensor::empty(src.shape(), src.dtype());  // the mapping is read-only
    copy.copy_from(src);
    all.emplace_back(n, copy);
  }
  for (auto& [n, tensor] : all) {
    if (n == "model.layers.0.input_layernorm.weight") tensor.data<uint16_t>()[3] = 0x7FC0;   // bf16 NaN
    if (n == "model.layers.1.mlp.gate.e_score_correction_bias") tensor.data<float>()[0] = INFINITY;
    if (n == "model.layers.2.self_attn.o_proj.weight") tensor.data<uint8_t>()[5] = 0x7F;  // e4m3 NaN
  }
  const std::string dir = t / "nan";
  fs::create_directories(dir);
  write_safetensors(dir + "/model.safetensors", all);
  fs::copy_file(src + "/config.json", dir + "/config.json");
  return dir;
}

TEST(HostileCli, NonFiniteWeightsAreReported) {
  DSA_REQUIRE_DSA_BINARY();
  TempTree t;
  const std::string dir = poisoned(t, tiny(t, "m"));
  CliResult r = run_dsa("check-model --model " + dir);
  EXPECT_EQ(r.rc, 1) << r.out;
  EXPECT_HAS(r.out, "3 tensors hold NaN or Inf values");
  EXPECT_HAS(r.out, "model.layers.0.input_layernorm.weight: 1 NaN, 0 Inf (first at flat index 3)");
  EXPECT_HAS(r.out, "model.layers.1.mlp.gate.e_score_correction_bias: 0 NaN, 1 Inf (first at flat index 0)");
  EXPECT_HAS(r.out, "model.layers.2.self_attn.o_proj.weight: 1 NaN, 0 Inf (first at flat index 5)");
  r = run_dsa("check-model --model " + dir + " --scan-seconds 0");
  EXPECT_EQ(r.rc, 0) << r.out;
  EXPECT_HAS(r.out, "time bound reached");
  // Generation: a non-finite logit is an error, not token 0.
  r = run_dsa("generate --model " + dir + " --prompt-ids 2,3,4 --max-tokens 2");
  expect_clean_error(r, "generate", "non-finite logit");
  // The clean checkpoint passes and generates.
  r = run_dsa("check-model --model " + t / "m");
  EXPECT_EQ(r.rc, 0) << r.out;
  EXPECT_HAS(r.out, "no NaN or Inf values in the scanned tensors");
}

// `dsa make-tiny --variant transformers` writes what transformers writes; check-model accepts it
// (the equivalence of its logits with the release form is tests/loader/test_variants.cpp).
TEST(HostileCli, TransformersVariantsLoad) {
  DSA_REQUIRE_DSA_BINARY();
  TempTree t;
  for (const char* arch : {"deepseek_v4", "glm_moe_dsa"}) {
    const std::string dir = t / arch;
    CliResult r = run_dsa(std::string("make-tiny --arch ") + arch + " --variant transformers --no-tokenizer --out " + dir);
    ASSERT_EQ(r.rc, 0) << r.out;
    r = run_dsa("check-model --model " + dir);
    EXPECT_EQ(r.rc, 0) << r.out;
    EXPECT_HAS(r.out, "all ");
    EXPECT_HAS(r.out, "expected tensors present");
  }
  const CliResult r = run_dsa("generate --model " + t / "deepseek_v4" + " --prompt-ids 2,3,4 --max-tokens 2");
  EXPECT_EQ(r.rc, 0) << r.out;
  EXPECT_HAS(r.out, "ids: ");
  EXPECT_HAS(run_dsa("make-tiny --arch glm_moe_dsa --canonical --out " + t / "x").out, "--canonical needs --variant");
}

// --speculative-tokens (docs/speculative-decoding.md): a checkpoint without MTP weights and a
// negative count are clean errors naming the flag and value; a valid count prints the statistics;
// likewise --speculative-acceptance (and a bad --temperature).
TEST(HostileCli, SpeculativeTokensNeedAnMtpLayer) {
  DSA_REQUIRE_DSA_BINARY();
  TempTree t;
  const std::string no_mtp = t / "no_mtp";
  ASSERT_EQ(run_dsa("make-tiny --arch deepseek_v4 --variant transformers --no-tokenizer --out " + no_mtp).rc, 0);
  const std::string gen = " --prompt-ids 2,3,4 --max-tokens 3";
  expect_clean_error(run_dsa("generate --model " + no_mtp + gen + " --speculative-tokens 2"), "no MTP",
                     "--speculative-tokens 2 needs an MTP layer");
  const std::string dir = tiny(t, "glm");
  expect_clean_error(run_dsa("generate --model " + dir + gen + " --speculative-tokens -3"), "negative",
                     "--speculative-tokens must be in [0, 64], got -3");
  const CliResult r = run_dsa("generate --model " + dir + gen + " --speculative-tokens 2");
  EXPECT_EQ(r.rc, 0) << r.out;
  EXPECT_HAS(r.out, "speculative: 2 tokens per step (rejection acceptance);");
  // --speculative-acceptance: a bad value names the flag and the value; sampled runs in both modes.
  expect_clean_error(run_dsa("generate --model " + dir + gen + " --speculative-tokens 2 --speculative-acceptance fast"),
                     "bad acceptance", "--speculative-acceptance must be 'rejection' or 'exact', got 'fast'");
  expect_clean_error(run_dsa("generate --model " + dir + gen + " --temperature -1"), "bad temperature",
                     "temperature must be finite and >= 0, got -1");
  for (const char* mode : {"rejection", "exact"}) {
    const CliResult s = run_dsa("generate --model " + dir + gen + " --speculative-tokens 2 --temperature 0.8 --top-k 20 "
                                "--seed 7 --speculative-acceptance " + mode);
    EXPECT_EQ(s.rc, 0) << s.out;
    EXPECT_HAS(s.out, std::string("speculative: 2 tokens per step (") + mode + " acceptance);");
  }
  EXPECT_HAS(run_dsa("make-tiny --arch glm_moe_dsa --script-mtp --out " + t / "x").out, "--script-mtp needs --script");
}

}  // namespace
}  // namespace dsa::test
