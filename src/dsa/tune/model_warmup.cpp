#include "dsa/tune/model_warmup.h"

#include <chrono>
#include <map>

#include <fmt/format.h>

#include "dsa/core/device.h"
#include "dsa/core/error.h"
#include "dsa/core/log.h"
#include "dsa/tune/active_tuning.h"
#include "dsa/tune/families.h"
#include "dsa/tune/timing.h"
#include "dsa/tune/warmup.h"

namespace dsa::tune {

void ModelWarmupOptions::validate() const {
  DSA_CHECK(max_seconds >= 0, "tuning: max_seconds must be >= 0 (0 = no limit), got {}", max_seconds);
  DSA_CHECK(timing.warmups >= 0, "tuning: warmups must be >= 0, got {}", timing.warmups);
  DSA_CHECK(timing.repeats >= 1, "tuning: repeats must be >= 1, got {}", timing.repeats);
}

std::string ModelWarmupReport::summary() const {
  std::string cache = cache_path.empty() ? "no cache file" : "cache " + cache_path.string();
  if (tuned > 0) cache += saved ? " (saved)" : " (NOT saved: " + save_error + ")";
  return fmt::format("tuning: {} bucket(s) of {} op(s): {} from the cache, {} tuned, {} skipped (default tactic), {} "
                     "failed; {:.2f} s; {}{}",
                     buckets, ops, found, tuned, skipped, failed, seconds, cache,
                     installed ? fmt::format("; active table: {} entries", table_entries) : "");
}

ModelWarmupReport load_and_tune_ops(const std::vector<TunableOp*>& ops, const EngineLimits& limits,
                                    TuningCache& cache, TuningTable& table, const ModelWarmupOptions& opt) {
  const auto t0 = std::chrono::steady_clock::now();
  opt.validate();
  limits.validate();
  ModelWarmupReport r;
  r.ops = ops.size();
  std::map<std::string, std::string> sigs;
  for (auto* op : ops) sigs[op->name()] = op->signature();
  const CacheLoadReport load = cache.load(table, sigs);
  r.cache_path = load.path;
  r.cache_message = load.message;
  log_debug("tuning: {}", load.message);

  const WarmupPlan plan = build_warmup_plan(ops, limits);
  WarmupOptions w;
  w.tune.timing = opt.timing;
  w.tune_missing = opt.tune;
  w.run_found = opt.tune;  // --no-tune: no GPU work at all
  w.max_seconds = opt.max_seconds;
  CacheSaveReport save;
  w.checkpoint = [&] { save = cache.save(table); };  // also every 20 s, so an interrupted start keeps its work
  const WarmupStats st = run_warmup(plan, ops, table, w);
  r.buckets = st.buckets;
  r.found = st.found;
  r.tuned = st.tuned;
  r.skipped = st.skipped;
  r.failed = st.failed;
  r.errors = st.errors;
  if (st.tuned > 0) {  // run_warmup saved at the end through the checkpoint
    r.saved = save.ok;
    r.save_error = save.error;
    if (save.ok) r.cache_path = save.path;
  }
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

ModelWarmupReport warm_up_for_model(const PlanModel& model, int device, const EngineLimits& limits,
                                    const ModelWarmupOptions& opt) {
  const auto t0 = std::chrono::steady_clock::now();
  const auto& devs = cuda_devices();
  DSA_CHECK(device >= 0 && device < static_cast<int>(devs.size()),
            "tuning: no CUDA device {} (this machine has {}: {})", device, devs.size(),
            devs.empty() ? cuda_unavailable_reason() : "");
  TuningCache cache(opt.cache_dir.empty() ? default_cache_dir() : opt.cache_dir, current_device_metadata(device));
  TuningTable& table = global_tuning_table();
  ModelWarmupReport r;
  try {
    {
      // The ops that run the plan hold device buffers (paged caches, expert weights): they are
      // freed at the end of this scope, before the model is served.
      TunableOps run_ops = make_tunable_ops(model, limits, device);
      for (const auto& n : run_ops.notes) log_info("tuning: {}", n);
      r = load_and_tune_ops(run_ops.pointers(), limits, cache, table, opt);
    }
    if (opt.install) {
      // Fresh, never-prepared instances: the chooser only needs their buckets, keys and tactic lists.
      auto chooser = install_active_tuning(make_tunable_ops(model, limits, device).ops, table, limits,
                                           fmt::format("{} on cuda:{}", model.name, device));
      r.installed = true;
      r.table_entries = chooser->entries();
    }
  } catch (const CudaContextLost&) {
    throw;  // nothing can run on this device any more
  } catch (const Error& e) {
    // E.g. a model shape a tunable op does not accept: serve with the default tactics.
    clear_active_tuning();
    r.installed = false;
    r.errors.push_back(e.what());
    log_warn("tuning: start-up tuning failed, the default tactics will run: {}", e.what());
  }
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  log_info("{}", r.summary());  // run_warmup already logged each failure
  return r;
}

}  // namespace dsa::tune
