#include "glm5_test_util.h"

#include <filesystem>
#include <fstream>
#include <memory>

#include <nlohmann/json.hpp>
#include <unistd.h>

#include "dsa/model/checkpoint_tiny.h"

namespace dsa::test {

namespace {
struct TinyDir {
  std::filesystem::path path;
  // dense: config.json's index_topk = kGlm5DenseTopk and num_experts_per_tok = n_routed_experts
  // (the weights stay those of the seed).
  TinyDir(const std::string& tag, uint64_t seed, bool fp8, bool pow2, bool dense = false, std::string variant = "") {
    path = std::filesystem::temp_directory_path() / ("dsa_glm5_" + tag + "_" + std::to_string(::getpid()));
    std::filesystem::remove_all(path);
    TinyOptions o;
    o.arch = "glm_moe_dsa";
    o.seed = seed;
    o.fp8 = fp8;
    o.pow2_scales = pow2;
    o.variant = std::move(variant);
    make_tiny_checkpoint(o, path.string());
    if (dense) {
      const auto cfg_path = path / "config.json";
      nlohmann::json cfg = nlohmann::json::parse(std::ifstream(cfg_path));
      cfg["index_topk"] = kGlm5DenseTopk;
      cfg["num_experts_per_tok"] = cfg.at("n_routed_experts");
      std::ofstream(cfg_path) << cfg.dump(2);
    }
  }
  ~TinyDir() { std::filesystem::remove_all(path); }
};
}  // namespace

const std::string& glm5_tiny_dir() {
  static TinyDir dir("tiny", 1, true, false);
  static const std::string s = dir.path.string();
  return s;
}

const std::string& glm5_tiny_dense_dir() {
  static TinyDir dir("tiny_dense", 1, true, false, true);
  static const std::string s = dir.path.string();
  return s;
}

const std::string& glm5_tiny_bf16_dir() {
  static TinyDir dir("tiny_bf16", 1, false, false);
  static const std::string s = dir.path.string();
  return s;
}

const std::string& glm5_tiny_transformers_dir() {
  static TinyDir dir("tiny_transformers", 1, false, false, false, "transformers");
  static const std::string s = dir.path.string();
  return s;
}

const std::string& glm5_twin_dir(bool fp8) {
  static TinyDir a("twin_fp8", 3, true, true), b("twin_bf16", 3, false, true);
  static const std::string sa = a.path.string(), sb = b.path.string();
  return fp8 ? sa : sb;
}

}  // namespace dsa::test
