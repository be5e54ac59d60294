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
  // (the weights stay those of seed 1).
  explicit TinyDir(const std::string& tag, bool dense = false) {
    path = std::filesystem::temp_directory_path() / ("dsa_glm5_tiny" + tag + "_" + std::to_string(::getpid()));
    std::filesystem::remove_all(path);
    TinyOptions o;
    o.arch = "glm_moe_dsa";
    o.seed = 1;
    o.fp8 = true;
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
  static TinyDir dir("");
  static const std::string s = dir.path.string();
  return s;
}

const std::string& glm5_tiny_dense_dir() {
  static TinyDir dir("_dense", true);
  static const std::string s = dir.path.string();
  return s;
}

}  // namespace dsa::test
