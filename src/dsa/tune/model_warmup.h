// Start-up tuning for serving: before the first request, warm_up_for_model
//   1. loads the tuning cache of the device (TuningCache under opt.cache_dir, default
//      default_cache_dir(): $DSA_CACHE_DIR, $XDG_CACHE_HOME/dsa or ~/.cache/dsa);
//   2. runs the warm-up plan of the model's tunable ops for the engine limits: buckets in the
//      cache launch their tactic once (first-launch costs are paid now), missing buckets are
//      tuned, all within opt.max_seconds (later items are skipped and run the default tactic);
//      with opt.tune off nothing runs on the GPU: only cached entries are used;
//   3. saves what it tuned (merged into the cache file, so the next start finds it);
//   4. installs the table as the ops' active tuning (active_tuning.h);
//   5. logs one line: buckets found in the cache / tuned / skipped / failed, time, cache file.
// Failures of single buckets are reported, never thrown: serving works with default tactics.
#pragma once
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "dsa/tune/plan_model.h"
#include "dsa/tune/timing.h"
#include "dsa/tune/tuning_cache.h"
#include "dsa/tune/tuning_table.h"
#include "dsa/tune/warmup_plan.h"

namespace dsa::tune {

struct ModelWarmupOptions {
  bool tune = true;               // tune missing buckets (false: cached entries only, no GPU work)
  double max_seconds = 60;        // bound on the plan run (tuning + warm-up launches); 0 = none
  TimingOptions timing;           // warm-ups and timed repeats per tactic
  std::filesystem::path cache_dir;  // empty: default_cache_dir()
  bool install = true;            // install the result as the active tuning
  void validate() const;
};

struct ModelWarmupReport {
  std::filesystem::path cache_path;
  std::string cache_message;  // the cache load report's line
  size_t ops = 0;             // tunable op instances
  size_t buckets = 0;         // distinct (op, bucket) keys of the plan
  size_t found = 0;           // ... in the cache
  size_t tuned = 0;           // ... tuned now
  size_t skipped = 0;         // ... neither (no-tune, or the time bound): default tactic
  size_t failed = 0;
  bool saved = false;         // a save was needed and succeeded (false also when nothing was tuned)
  std::string save_error;
  double seconds = 0;         // the whole start-up sequence
  size_t table_entries = 0;   // entries the installed table holds (all of the cache's for this device)
  bool installed = false;
  std::vector<std::string> errors;
  // "tuning: 27 bucket(s): 20 from the cache, 7 tuned, 0 skipped, 0 failed; 3.2 s; cache <path>"
  std::string summary() const;
};

// Steps 1-3 for any ops (the part tests run with CPU ops): fills `table`, returns the report.
ModelWarmupReport load_and_tune_ops(const std::vector<TunableOp*>& ops, const EngineLimits& limits,
                                    TuningCache& cache, TuningTable& table, const ModelWarmupOptions& opt);

// The whole sequence for `model` on CUDA device `device` (throws when there is no such device).
ModelWarmupReport warm_up_for_model(const PlanModel& model, int device, const EngineLimits& limits,
                                    const ModelWarmupOptions& opt = {});

}  // namespace dsa::tune
