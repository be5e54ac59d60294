// `dsa bench NAME [--json FILE] [--quick] [--device cuda:N]`: runs one registered benchmark
// (bench/bench.h); commands with options of their own (`dsa bench serve`) register through
// add_bench_command (commands.h).
#include <memory>

#include <CLI/CLI.hpp>

#include "bench/bench.h"
#include "cli_args.h"
#include "commands.h"

namespace dsa::cli {
namespace {

const bool registered = add_command([](CLI::App& app) {
  auto* cmd = app.add_subcommand("bench", "Benchmarks: time, TFLOP/s, GB/s, % of roofline (table + JSON)");
  cmd->require_subcommand(1);
  for (const auto& add : bench_commands()) add(*cmd);  // e.g. `dsa bench serve` (cmd_bench_serve.cpp)
  for (const auto& e : bench::registry()) {
    auto* sub = cmd->add_subcommand(e.name, e.help);
    auto opts = std::make_shared<bench::Options>();
    sub->add_option("--json", opts->json_path, "Write results as JSON to this file");
    sub->add_flag("--quick", opts->quick, "Fewer shapes and repeats");
    auto device = std::make_shared<std::string>("cuda");
    sub->add_option("--device", *device, "cuda, cuda:N (or N)")->capture_default_str();
    if (e.model_options) {
      sub->add_option("--model", opts->model, "Checkpoint directory (else --preset; with both, the preset names the full model that rates are extrapolated to)");
      sub->add_option("--preset", opts->preset,
                      "Real shapes with fast-filled weights: flash, pro (DeepSeek-V4) or glm-5.1; tiny-v4, tiny-glm")
          ->capture_default_str();
      sub->add_option("--layers", opts->layers, "Layers of the preset checkpoint (0: a default mix of layer kinds)");
      sub->add_option("--load-format", opts->load_format,
                      "dummy: weights filled on the device from the config (no checkpoint written; --model may be a "
                      "directory with only config.json or a built-in name); safetensors: the checkpoint (a preset's "
                      "is written first with make-tiny); auto: dummy for a preset, the checkpoint for --model")
          ->check(CLI::IsMember({"auto", "safetensors", "dummy"}))
          ->capture_default_str();
      sub->add_option("--batch", opts->batch, "Comma-separated batch sizes (concurrent decoding requests)")
          ->capture_default_str();
      sub->add_option("--context", opts->context,
                      "Comma-separated tokens of context of every request when decode is timed (K, M suffixes: "
                      "4K,128K,1M)")
          ->capture_default_str();
      sub->add_option("--on", opts->device_name, "cuda (default) or cpu")->capture_default_str();
      sub->add_option("--graphs", opts->graphs,
                      "CUDA graphs of the decode steps: on, off (eager, as --enforce-eager) or both (each shape "
                      "measured both ways, for the ratio)")
          ->check(CLI::IsMember({"on", "off", "both"}))
          ->capture_default_str();
      sub->add_option("--speculative-tokens", opts->speculative,
                      "decode: comma-separated draft counts N (MTP layer): per N, the verification of N + 1 tokens "
                      "per request, the N MTP draft steps, the round and its speed-up over N = 0 at acceptance "
                      "rates 0.6-0.9 (every draft accepted: a benchmark mode of the engine; the model needs its MTP "
                      "layer)");
      sub->add_option("--tensor-parallel-size", opts->tensor_parallel,
                      "Ranks the model is sharded over (GLM-5.1 or DeepSeek-V4; threads of this process; CUDA graphs off)")
          ->capture_default_str();
      sub->add_flag("--enable-expert-parallel", opts->expert_parallel,
                    "With --tensor-parallel-size N > 1: the routed experts split by expert over the ranks");
    }
    auto fn = e.fn;
    auto name = e.name;
    sub->callback([opts, fn, name, device] {
      opts->device = parse_cuda_device(*device);
      auto rows = fn(*opts);
      bench::print_table("dsa bench " + name, rows);
      if (!opts->json_path.empty()) bench::write_json(opts->json_path, name, rows);
    });
  }
});

}  // namespace
}  // namespace dsa::cli
