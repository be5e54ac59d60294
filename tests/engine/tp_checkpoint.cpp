#include "tp_checkpoint.h"

#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <utility>

#include <unistd.h>

#include <nlohmann/json.hpp>

#include "dsa/model/checkpoint_tiny.h"
#include "engine_models.h"

namespace dsa::engine::test {
namespace {

struct TpDir {
  std::filesystem::path path;
  std::string str;
  TpDir(bool fp8, int64_t index_topk) {
    path = std::filesystem::temp_directory_path() /
           ("dsa_tp_glm_512_" + std::string(fp8 ? "fp8_" : "bf16_") + std::to_string(index_topk) + "_" +
            std::to_string(::getpid()));
    std::filesystem::remove_all(path);
    TinyOptions o;
    o.arch = "glm_moe_dsa";
    o.seed = kTpCheckpointSeed;
    o.intermediate = 512;
    o.fp8 = fp8;
    make_tiny_checkpoint(o, path.string());
    const int64_t experts = nlohmann::json::parse(std::ifstream(path / "config.json")).at("n_routed_experts");
    set_config_fields(path.string(), {{"index_topk", index_topk}, {"num_experts_per_tok", experts}});
    str = path.string();
  }
  ~TpDir() { std::filesystem::remove_all(path); }
};

struct TpV4Dir {
  std::filesystem::path path;
  std::string str;
  explicit TpV4Dir(int64_t index_topk) {
    path = std::filesystem::temp_directory_path() /
           ("dsa_tp_v4_512_" + std::to_string(index_topk) + "_" + std::to_string(::getpid()));
    std::filesystem::remove_all(path);
    schema::DeepseekV4Dims d = tiny_deepseek_v4_dims();
    d.o_groups = 4;
    d.moe_inter = 512;
    d.experts_per_tok = d.experts;
    TinyOptions o;
    o.arch = "deepseek_v4";
    o.seed = kTpCheckpointSeed;
    o.v4_dims = d;
    make_tiny_checkpoint(o, path.string());
    set_config_fields(path.string(), {{"index_topk", index_topk}});
    str = path.string();
  }
  ~TpV4Dir() { std::filesystem::remove_all(path); }
};

}  // namespace

const std::string& tp_v4_checkpoint_dir(int64_t index_topk) {
  static std::mutex mu;
  static std::map<int64_t, std::unique_ptr<TpV4Dir>> dirs;
  std::lock_guard<std::mutex> lock(mu);
  auto& d = dirs[index_topk];
  if (!d) d = std::make_unique<TpV4Dir>(index_topk);
  return d->str;
}

const std::string& tp_checkpoint_dir(bool fp8, int64_t index_topk) {
  static std::mutex mu;
  static std::map<std::pair<bool, int64_t>, std::unique_ptr<TpDir>> dirs;
  std::lock_guard<std::mutex> lock(mu);
  auto& d = dirs[{fp8, index_topk}];
  if (!d) d = std::make_unique<TpDir>(fp8, index_topk);
  return d->str;
}

}  // namespace dsa::engine::test
