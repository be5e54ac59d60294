#include "engine_models.h"

#include <filesystem>
#include <fstream>
#include <map>
#include <random>

#include <unistd.h>

#include "dsa/engine/sampler.h"
#include "dsa/engine/session.h"
#include "dsa/model/checkpoint_tiny.h"

namespace dsa::engine::test {
namespace {
struct TinyDir {
  std::filesystem::path path;
  explicit TinyDir(const std::string& arch) {
    path = std::filesystem::temp_directory_path() / ("dsa_engine_" + arch + "_" + std::to_string(::getpid()));
    std::filesystem::remove_all(path);
    TinyOptions o;
    o.arch = arch;
    o.seed = 1;
    make_tiny_checkpoint(o, path.string());
  }
  ~TinyDir() { std::filesystem::remove_all(path); }
};
}  // namespace

void set_config_fields(const std::string& dir, const nlohmann::json& fields) {
  const std::filesystem::path path = std::filesystem::path(dir) / "config.json";
  nlohmann::json cfg = nlohmann::json::parse(std::ifstream(path));
  for (const auto& [k, v] : fields.items()) cfg[k] = v;
  std::ofstream(path) << cfg.dump(2);
}

const std::string& tiny_model_dir(const std::string& arch) {
  static std::map<std::string, std::unique_ptr<TinyDir>> dirs;
  auto& d = dirs[arch];
  if (!d) d = std::make_unique<TinyDir>(arch);
  static std::map<std::string, std::string> paths;
  return paths[arch] = d->path.string();
}

std::unique_ptr<model::CausalLM> load_tiny_lm(const std::string& arch) {
  return model::load_causal_lm(tiny_model_dir(arch), Device::cpu(), {.mtp = true});
}

std::vector<std::vector<int32_t>> random_prompts(const std::vector<int64_t>& lengths, int64_t vocab, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<std::vector<int32_t>> out;
  for (int64_t n : lengths) {
    std::vector<int32_t> p;
    for (int64_t i = 0; i < n; ++i) p.push_back(static_cast<int32_t>(2 + rng() % static_cast<uint64_t>(vocab - 2)));
    out.push_back(std::move(p));
  }
  return out;
}

std::vector<int32_t> greedy_direct(model::CausalLM& lm, const std::vector<int32_t>& prompt, int64_t max_tokens) {
  const int64_t V = lm.config().vocab_size;
  Session session(lm);
  const kv::RequestId id = session.add_request();
  const ForwardBatch b = ForwardBatch::of(id, prompt);
  std::vector<int32_t> out{argmax_token(session.forward(b).data<float>(), V)};
  while (static_cast<int64_t>(out.size()) < max_tokens) {
    ForwardBatch d{{out.back()}, {id}, {static_cast<int64_t>(prompt.size() + out.size() - 1)}};
    out.push_back(argmax_token(session.forward(d).data<float>(), V));
  }
  session.free_request(id);
  return out;
}

}  // namespace dsa::engine::test
