// `dsa check-model --model DIR [--device cpu|cuda[:N]] [--no-progress] [--scan-seconds S]`: reads
// config.json (the same reader and checks as every other command), validates the checkpoint
// against the model's weight spec (missing / wrong / unknown tensors), loads the weights in their
// checkpoint formats (memory-mapped on the CPU, copied to the GPU with --device cuda), reports
// the load time, and scans the stored tensors for NaN / Inf for up to --scan-seconds (default
// 60). Exit code 1 when a tensor holds non-finite values. --load-format dummy fills the weights
// of the config (a directory with config.json, or a built-in name; --layers N) instead and, on
// the CPU, scans what it filled (the dummy values must be finite).
#include <cstdio>

#include <CLI/CLI.hpp>

#include "cli_args.h"
#include "commands.h"
#include "model_load.h"
#include "dsa/model/checkpoint_load.h"
#include "dsa/model/config.h"
#include "dsa/model/dummy_weights.h"
#include "dsa/model/load_format.h"
#include "dsa/model/weight_scan.h"

namespace dsa::cli {
namespace {

struct Args {
  std::string model, device = "cpu";
  bool no_progress = false;
  double scan_seconds = 60;
  LoadFormatArgs load;
};

void run(const Args& a) {
  DSA_CHECK(a.scan_seconds >= 0, "--scan-seconds must be >= 0, got {}", a.scan_seconds);
  LoadOptions o;
  o.device = parse_device(a.device);
  o.progress = !a.no_progress;
  const model::WeightSource source = a.load.source();
  const model::ModelConfig cfg = model::model_config_for_load(a.model, source.format, source.layers);
  const LoadedWeights w =
      source.dummy() ? dummy_model_weights(cfg, o.device, source.seed) : load_model_weights(a.model, cfg, o);
  std::printf("%s (%s): %zu tensors, %.1f MiB on %s in %.2f s (%.2f GB/s)\n%s", a.model.c_str(),
              std::string(model::arch_name(cfg.arch)).c_str(), w.tensors.size(), w.bytes / 1048576.0,
              o.device.str().c_str(), w.seconds, w.seconds > 0 ? w.bytes / w.seconds / 1e9 : 0.0,
              w.report.summary().c_str());
  if (source.dummy()) {
    std::vector<std::pair<std::string, Tensor>> filled;
    if (!o.device.is_cuda())
      for (const auto& [n, t] : w.tensors) filled.emplace_back(n, t);
    const WeightScanReport scan = scan_non_finite(filled, a.scan_seconds);
    std::printf("%s", o.device.is_cuda() ? "dummy weights on the device: not scanned (--device cpu scans them)\n"
                                         : scan.summary().c_str());
    if (!scan.bad.empty()) set_exit_code(1);
    return;
  }
  // The stored tensors, as the files hold them (host mappings, whatever --device says).
  const Checkpoint ckpt = Checkpoint::open(a.model);
  std::vector<std::pair<std::string, Tensor>> stored;
  for (const auto& n : ckpt.names()) stored.emplace_back(n, ckpt.get(n));
  const WeightScanReport scan = scan_non_finite(stored, a.scan_seconds);
  std::printf("%s", scan.summary().c_str());
  if (!scan.bad.empty()) set_exit_code(1);
}

const bool registered = add_command([](CLI::App& app) {
  auto* cmd = app.add_subcommand("check-model", "Validate and load a checkpoint directory, report load time");
  auto a = std::make_shared<Args>();
  cmd->add_option("--model", a->model,
                  "Checkpoint directory (config.json + safetensors); with --load-format dummy also a directory with "
                  "only config.json or a built-in name")
      ->required();
  add_load_format_options(cmd, a->load);
  cmd->add_option("--device", a->device, "cpu (default), cuda or cuda:N");
  cmd->add_flag("--no-progress", a->no_progress, "No progress bar");
  cmd->add_option("--scan-seconds", a->scan_seconds, "Time bound of the NaN / Inf scan of the stored tensors (0: no scan)")
      ->capture_default_str();
  cmd->callback([a] { run(*a); });
});

}  // namespace
}  // namespace dsa::cli
