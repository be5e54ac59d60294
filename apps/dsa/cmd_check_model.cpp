// `dsa check-model --model DIR [--device cpu|cuda[:N]] [--no-progress]`: reads config.json, validates
// the checkpoint against the model's weight spec (missing / wrong / unknown tensors), loads the
// weights in their checkpoint formats (memory-mapped on the CPU, copied to the GPU with
// --device cuda) and reports the load time.
#include <cstdio>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "cli_args.h"
#include "commands.h"
#include "dsa/model/checkpoint_load.h"

namespace dsa::cli {
namespace {

struct Args {
  std::string model, device = "cpu";
  bool no_progress = false;
};

void run(const Args& a) {
  LoadOptions o;
  o.device = parse_device(a.device);
  o.progress = !a.no_progress;
  const auto cfg = read_config_json(a.model);
  const std::string type =
      cfg.is_object() && cfg.contains("model_type") && cfg["model_type"].is_string() ? cfg["model_type"].get<std::string>() : "";
  LoadedWeights w;
  if (type == "deepseek_v4")
    w = load_deepseek_v4(a.model, o);
  else if (type == "glm_moe_dsa")
    w = load_glm5(a.model, o);
  else
    fail("{}/config.json: model_type '{}' is not deepseek_v4 or glm_moe_dsa", a.model, type);
  std::printf("%s (%s): %zu tensors, %.1f MiB on %s in %.2f s (%.2f GB/s)\n%s", a.model.c_str(), type.c_str(),
              w.tensors.size(), w.bytes / 1048576.0, o.device.str().c_str(), w.seconds,
              w.seconds > 0 ? w.bytes / w.seconds / 1e9 : 0.0, w.report.summary().c_str());
}

const bool registered = add_command([](CLI::App& app) {
  auto* cmd = app.add_subcommand("check-model", "Validate and load a checkpoint directory, report load time");
  auto a = std::make_shared<Args>();
  cmd->add_option("--model", a->model, "Checkpoint directory (config.json + safetensors)")->required();
  cmd->add_option("--device", a->device, "cpu (default), cuda or cuda:N");
  cmd->add_flag("--no-progress", a->no_progress, "No progress bar");
  cmd->callback([a] { run(*a); });
});

}  // namespace
}  // namespace dsa::cli
