// `dsa tune --model NAME|DIR [--max-num-batched-tokens N] [--max-num-seqs N] [--device cuda:N]
// [--force]` (the engine-limit names of `dsa serve` and vLLM; --max-batched-tokens and
// --max-seqs still work): runs the
// warm-up plan of a model on this GPU (every tunable kernel family at every shape bucket the
// engine can hit), tunes what the cache does not hold, and writes the tuning cache. A second
// run finds everything. `--selftest` runs the same machinery on a synthetic CPU op (any
// machine): a check that plan, tuner, cache and progress work, not a tuning of real kernels.
#include <cstdio>
#include <memory>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "cli_args.h"
#include "commands.h"
#include "dsa/core/device.h"
#include "dsa/core/error.h"
#include "dsa/core/version.h"
#include "dsa/model/config.h"
#include "dsa/tune/families.h"
#include "dsa/tune/synthetic_op.h"
#include "dsa/tune/tuning_cache.h"
#include "dsa/tune/warmup.h"

namespace dsa::cli {
namespace {

struct TuneArgs {
  std::string model;
  int64_t max_batched_tokens = 8192;
  int64_t max_seqs = 256;
  bool force = false;
  bool selftest = false;
  std::string device = "cuda";
  int warmups = 3;
  int repeats = 15;
};

void print_choices(const tune::WarmupStats& st) {
  if (st.results.empty()) return;
  std::printf("%-20s %-44s %-26s %10s %10s %8s\n", "family", "bucket", "tactic", "us", "default", "speedup");
  for (const auto& r : st.results) {
    if (!r.ok) {
      std::printf("%-20s %-44s %s\n", r.family.c_str(), r.key.c_str(), ("FAILED: " + r.error).c_str());
      continue;
    }
    const auto& e = r.entry;
    std::string def = e.default_us > 0 ? fmt::format("{:.2f}", e.default_us) : "failed";
    std::string sp = e.default_us > 0 ? fmt::format("{:.2f}x", e.default_us / e.us) : "-";
    std::printf("%-20s %-44s %-26s %10.2f %10s %8s\n", r.family.c_str(), r.key.c_str(),
                fmt::format("{} ({})", e.tactic, e.description).c_str(), e.us, def.c_str(), sp.c_str());
  }
}

void run_tune(const TuneArgs& a) {
  tune::EngineLimits limits{a.max_batched_tokens, a.max_seqs};
  limits.validate();
  std::unique_ptr<tune::TuningCache> cache;
  tune::TunableOps made;
  std::vector<std::unique_ptr<tune::TunableOp>> selftest_ops;
  std::vector<tune::TunableOp*> ops;
  std::string target;

  if (a.selftest) {
    tune::CacheMetadata m;
    m.dsa_version = kVersion;
    m.device_name = "selftest-cpu";
    cache = std::make_unique<tune::TuningCache>(tune::default_cache_dir(), m);
    selftest_ops.push_back(std::make_unique<tune::SyntheticOp>());
    ops.push_back(selftest_ops.back().get());
    target = "synthetic CPU op (self-test of the tuning machinery; no real kernels are tuned)";
  } else {
    DSA_CHECK(!a.model.empty(), "dsa tune: --model NAME|DIR is required (built-in names: {})",
              fmt::format("{}", fmt::join(model::builtin_model_names(), ", ")));
    tune::PlanModel pm = tune::load_plan_model(a.model);
    if (cuda_devices().empty()) {
      std::printf(
          "dsa tune: nothing to tune on this device: %s.\n"
          "Tunable kernels (their tactics: split counts, tile shapes) exist only for CUDA GPUs; the CPU path runs\n"
          "the reference ops, which have a single way to compute and nothing to choose.\n"
          "(`dsa tune --selftest` checks the tuning machinery itself on this machine.)\n",
          cuda_unavailable_reason().c_str());
      return;
    }
    const int device = parse_cuda_device(a.device);
    DSA_CHECK(device < static_cast<int>(cuda_devices().size()),
              "dsa tune: --device {}: this machine has {} CUDA device(s)", a.device, cuda_devices().size());
    made = tune::make_tunable_ops(pm, limits, device);
    for (const auto& n : made.notes) std::printf("note: %s\n", n.c_str());
    ops = made.pointers();
    const auto& dev = cuda_devices().at(device);
    target = fmt::format("{} on cuda:{} ({}, sm {})", pm.name, device, dev.name, dev.capability.str());
    if (ops.empty()) {
      std::printf("dsa tune: nothing to tune: this build has no tunable kernel family for %s yet (see notes).\n",
                  target.c_str());
      return;
    }
    cache = std::make_unique<tune::TuningCache>(tune::TuningCache::for_device(device));
  }

  std::printf("dsa tune: %s\n", target.c_str());
  std::fflush(stdout);
  tune::WarmupOptions opt;
  opt.force = a.force;
  opt.progress = true;
  opt.tune.timing.warmups = a.warmups;
  opt.tune.timing.repeats = a.repeats;
  tune::TuneReport rep = tune::load_tune_and_save(
      ops, limits, *cache, tune::global_tuning_table(), opt, [&](const tune::TuneReport& r) {
        std::printf("cache: %s\n", r.load.message.c_str());
        std::printf("plan: %zu op(s), %zu token buckets (1..%lld), %zu mixed batch(es), %zu items, %zu distinct "
                    "buckets\n",
                    ops.size(), r.plan.token_buckets.size(), static_cast<long long>(limits.max_batched_tokens),
                    tune::mixed_batches(limits).size(), r.plan.items.size(), r.distinct_buckets);
        std::fflush(stdout);
      });
  const auto& st = rep.stats;
  print_choices(st);
  std::printf("tuned %zu bucket(s), found %zu in the cache, %zu failed; %.2f s\n", st.tuned, st.found, st.failed,
              st.seconds);
  if (rep.save.ok)
    std::printf("cache: %s (%zu entries written, %zu in the file)\n", rep.save.path.string().c_str(),
                rep.save.written, rep.save.total);
  else
    std::printf("cache: NOT saved: %s\n", rep.save.error.c_str());
  for (const auto& e : st.errors) std::printf("error: %s\n", e.c_str());
  if (!rep.ok()) set_exit_code(1);
}

const bool registered = add_command([](CLI::App& app) {
  auto* cmd = app.add_subcommand("tune", "Tune kernels for a model on this GPU and write the tuning cache");
  auto a = std::make_shared<TuneArgs>();
  cmd->add_option("--model", a->model, "Built-in model name or a directory with config.json");
  cmd->add_option("--max-num-batched-tokens,--max-batched-tokens", a->max_batched_tokens,
                  "Engine limit: tokens per step")
      ->capture_default_str();
  cmd->add_option("--max-num-seqs,--max-seqs", a->max_seqs, "Engine limit: concurrent sequences")->capture_default_str();
  cmd->add_flag("--force", a->force, "Re-tune buckets that are already in the cache");
  cmd->add_option("--device", a->device, "cuda, cuda:N (or N)")->capture_default_str();
  cmd->add_option("--warmups", a->warmups, "Untimed runs per tactic")->capture_default_str();
  cmd->add_option("--repeats", a->repeats, "Timed runs per tactic (median)")->capture_default_str();
  cmd->add_flag("--selftest", a->selftest, "Run the tuning machinery on a synthetic CPU op (no GPU needed)");
  cmd->callback([a] { run_tune(*a); });
});

}  // namespace
}  // namespace dsa::cli
