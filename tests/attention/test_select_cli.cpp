// `dsa select` end to end: runs the built CLI (found through DSA_TEST_BINARY_DIR, which ctest
// sets) and checks exit codes, the JSON document and the reasons on failure.
#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "common/testing.h"

namespace {

struct CliRun {
  int rc = -1;
  std::string out;  // stdout + stderr
};

std::string dsa_binary() {
  const char* dir = std::getenv("DSA_TEST_BINARY_DIR");
  if (!dir) return "";
  std::filesystem::path p = std::filesystem::path(dir) / "apps" / "dsa" / "dsa";
  return std::filesystem::exists(p) ? p.string() : "";
}

CliRun run(const std::string& args, bool merge_stderr = true, const std::string& env = "") {
  CliRun r;
  // The environment must not force a backend or a capability behind the test's back.
  std::string cmd = "env -u DSA_ATTENTION_BACKEND -u DSA_DEVICE_CAPABILITY " + env + " " + dsa_binary() + " " + args +
                    (merge_stderr ? " 2>&1" : " 2>/dev/null");
  FILE* f = popen(cmd.c_str(), "r");
  if (!f) return r;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), f)) > 0) r.out.append(buf.data(), n);
  int status = pclose(f);
  r.rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

#define REQUIRE_DSA_BINARY()                                                                   \
  do {                                                                                         \
    if (dsa_binary().empty()) GTEST_SKIP() << "dsa binary not found (run through ctest, which " \
                                              "sets DSA_TEST_BINARY_DIR)";                     \
  } while (0)

}  // namespace

TEST(DsaSelectCli, CpuPlatformSelectsReferenceForEveryModel) {
  REQUIRE_DSA_BINARY();
  for (const char* m : {"deepseek-v4-flash", "deepseek-v4-pro", "glm-5.1"}) {
    CliRun r = run(std::string("select --model ") + m + " --capability none --json", false);
    ASSERT_EQ(r.rc, 0) << r.out;
    auto j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j["ok"], true);
    EXPECT_EQ(j["platform"], "cpu");
    for (const auto& l : j["layer_types"]) EXPECT_EQ(l["backend"], "cpu_reference") << m;
    EXPECT_EQ(j["block_size"], std::string(m) == "glm-5.1" ? 64 : 256);
  }
}

TEST(DsaSelectCli, JsonForV4FlashOnSm120) {
  REQUIRE_DSA_BINARY();
  CliRun r = run("select --model deepseek-v4-flash --capability 12.0 --json", false);
#ifdef DSA_WITH_CUDA
  ASSERT_EQ(r.rc, 0) << r.out;
#else
  ASSERT_EQ(r.rc, 1) << r.out;  // the CUDA backend is not in a CPU-only build
#endif
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["platform"], "cuda sm_120");
  ASSERT_EQ(j["layer_types"].size(), 3u);
  const auto& csa = j["layer_types"][1];
  EXPECT_EQ(csa["type"], "csa");
  EXPECT_EQ(csa["layers"], 21);
  EXPECT_EQ(csa["topk"], 512);
  EXPECT_EQ(csa["kv_cache_dtype"], "fp8_model1");
#ifdef DSA_WITH_CUDA
  EXPECT_EQ(csa["backend"], "cuda_sparse_mla");
  ASSERT_EQ(csa["caches"].size(), 3u);
  EXPECT_EQ(csa["caches"][1]["page_size"], 64);
  EXPECT_DOUBLE_EQ(csa["bytes_per_token"].get<double>(), 179.25);
  EXPECT_DOUBLE_EQ(j["kv_bytes_per_token_all_layers"].get<double>(), 21 * 179.25 + 20 * 6.75);
  EXPECT_EQ(csa["not_candidates"]["cpu_reference"][0], "runs only on the CPU platform (selecting for cuda sm_120)");
#else
  EXPECT_TRUE(csa["backend"].is_null());
  EXPECT_EQ(csa["rejected"]["cuda_sparse_mla"][0], "dsa built without CUDA");
#endif
}

TEST(DsaSelectCli, NothingFitsExitsNonZeroWithReasons) {
  REQUIRE_DSA_BINARY();
  CliRun r = run("select --model glm-5.1 --capability 8.0");
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.out.find("No valid attention backend for cuda sm_80 with {dtype: bf16, kv_cache_dtype: fp8_ds_mla"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("compute capability 8.0 not supported (needs 8.9, 9.x, 10.x or 12.x: e4m3 conversions and mma.sync)"),
            std::string::npos)
      << r.out;
  r = run("select --model deepseek-v4-pro --capability none --kv-cache-dtype bf16");
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.out.find("kv_cache_dtype bf16 not supported (supported: fp8_ds_mla, fp8_model1)"), std::string::npos)
      << r.out;
}

TEST(DsaSelectCli, UserErrors) {
  REQUIRE_DSA_BINARY();
  CliRun r = run("select --model glm-5.1 --capability 9.0 --attention-backend flashmla");
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.out.find("Unknown attention backend 'flashmla' (from --attention-backend). Known backends: "
                       "cpu_reference, cuda_sparse_mla"),
            std::string::npos)
      << r.out;
  r = run("select --model glm-5.1 --capability 9.0 --attention-backend cpu_reference");
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.out.find("Attention backend cpu_reference (forced by --attention-backend) is not valid for cuda sm_90"),
            std::string::npos)
      << r.out;
  r = run("select --model deepseek-v4-flash --capability none --block-size 64");
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.out.find("block_size 64 does not hold whole hca compressed entries"), std::string::npos) << r.out;
  r = run("select --model llama-3 --capability none");
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.out.find("model 'llama-3' is neither a built-in"), std::string::npos) << r.out;
  r = run("select --model glm-5.1 --kv-cache-dtype fp16 --capability none");
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.out.find("unknown kv-cache dtype 'fp16'"), std::string::npos) << r.out;
}

TEST(DsaSelectCli, InfoListsAttentionBackends) {
  REQUIRE_DSA_BINARY();
  CliRun r = run("info --json", false);
  ASSERT_EQ(r.rc, 0) << r.out;
  auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["attention_backends"].size(), 2u);
  EXPECT_EQ(j["attention_backends"][0]["name"], "cpu_reference");
  EXPECT_EQ(j["attention_backends"][1]["name"], "cuda_sparse_mla");
  EXPECT_EQ(j["attention_backends"][1]["page_sizes"], "powers of two 1..256");
  EXPECT_EQ(j["attention_priority"]["12.0"], nlohmann::json::array({"cuda_sparse_mla"}));
  EXPECT_EQ(j["attention_priority"]["cpu"], nlohmann::json::array({"cpu_reference"}));
}

TEST(DsaSelectCli, CapabilityOverrideAndEnvBackend) {
  REQUIRE_DSA_BINARY();
  CliRun r = run("select --model glm-5.1 --json", false, "DSA_DEVICE_CAPABILITY=12.0");
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["platform"], "cuda sm_120");
  EXPECT_EQ(j["capability_source"], "DSA_DEVICE_CAPABILITY=12.0");
  // --capability wins over the override.
  r = run("select --model glm-5.1 --capability none --json", false, "DSA_DEVICE_CAPABILITY=12.0");
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_EQ(nlohmann::json::parse(r.out)["platform"], "cpu");
  r = run("select --model glm-5.1 --capability none", true, "DSA_ATTENTION_BACKEND=cuda_sparse_mla");
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.out.find("Attention backend cuda_sparse_mla (forced by DSA_ATTENTION_BACKEND) is not valid for cpu"),
            std::string::npos)
      << r.out;
}
