// `dsa make-tiny --arch deepseek_v4|glm_moe_dsa --out DIR [--seed N] [--bf16]`: writes a small
// random checkpoint in the official format (config.json, sharded safetensors, index) and
// validates it against the weight spec of its own config.json.
#include <chrono>
#include <cstdio>
#include <fstream>

#include <CLI/CLI.hpp>

#include "commands.h"
#include "dsa/model/checkpoint.h"
#include "dsa/model/checkpoint_tiny.h"

namespace dsa::cli {
namespace {

struct Args {
  std::string arch, out;
  uint64_t seed = 0;
  bool bf16 = false;
};

void run(const Args& a) {
  TinyOptions o;
  o.arch = a.arch;
  o.seed = a.seed;
  o.fp8 = !a.bf16;
  const auto t0 = std::chrono::steady_clock::now();
  TinyCheckpoint t = make_tiny_checkpoint(o, a.out);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  // Read back and check against the spec derived from the config.json just written.
  Checkpoint c = Checkpoint::open(a.out);
  std::ifstream in(a.out + "/config.json");
  const auto cfg = nlohmann::json::parse(in);
  const auto specs = a.arch == "deepseek_v4" ? weights::deepseek_v4_weight_specs(weights::deepseek_v4_dims_from_config(cfg))
                                             : weights::glm5_weight_specs(weights::glm5_dims_from_config(cfg));
  weights::validate(c, specs).throw_if_invalid(a.out);
  std::printf("wrote %s: %s, %zu tensors, %.2f MiB in %zu shards (seed %llu, %s) in %.2f s; validated\n", a.out.c_str(),
              a.arch.c_str(), t.tensors, static_cast<double>(t.bytes) / (1024.0 * 1024.0), t.shards,
              static_cast<unsigned long long>(a.seed), a.bf16 ? "bf16" : "fp8", secs);
}

const bool registered = add_command([](CLI::App& app) {
  auto* cmd = app.add_subcommand("make-tiny", "Write a small random checkpoint in the official format");
  auto a = std::make_shared<Args>();
  cmd->add_option("--arch", a->arch, "deepseek_v4 or glm_moe_dsa")
      ->required()
      ->check(CLI::IsMember({"deepseek_v4", "glm_moe_dsa"}));
  cmd->add_option("--out", a->out, "Output directory")->required();
  cmd->add_option("--seed", a->seed, "Random seed (default 0)");
  cmd->add_flag("--bf16", a->bf16, "BF16 weights instead of FP8 (V4 routed experts stay MXFP4)");
  cmd->callback([a] { run(*a); });
});

}  // namespace
}  // namespace dsa::cli
