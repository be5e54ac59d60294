// Runs a warm-up plan: each item whose bucket is in the table (and --force is off) is "found"
// and its chosen tactic runs once (so first-launch costs such as lazy module loading are paid
// now); every other bucket is tuned and its choice recorded in the table. Failures are
// counted and described in the stats (logged too unless a progress bar is shown: then the
// caller prints them after the bar), never thrown (except a CUDA context lost for good).
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "dsa/tune/tuner.h"
#include "dsa/tune/tuning_cache.h"
#include "dsa/tune/tuning_table.h"
#include "dsa/tune/warmup_plan.h"

namespace dsa::tune {

struct WarmupOptions {
  TuneOptions tune;
  bool force = false;     // re-tune buckets that are in the table
  bool progress = false;  // progress bar on stderr
  // Called after a tuned bucket when checkpoint_seconds have passed since the last call (e.g.
  // to save the cache, so an interrupted long run keeps what it tuned), and once at the end.
  std::function<void()> checkpoint;
  double checkpoint_seconds = 20;
  // Start-up limits (warm_up_for_model): with tune_missing off, buckets not in the table are
  // skipped (they run the default tactic at run time); with run_found off, buckets found in
  // the table are not launched; with max_seconds > 0, every item that would start after that
  // many seconds is skipped (a bucket being tuned is finished, so the bound is soft by one
  // bucket). Skipped keys are counted in WarmupStats::skipped.
  bool tune_missing = true;
  bool run_found = true;
  double max_seconds = 0;
};

struct WarmupStats {
  size_t items = 0;    // plan items run
  size_t buckets = 0;  // distinct (op, bucket) keys
  size_t tuned = 0;    // keys tuned now
  size_t found = 0;    // keys already in the table
  size_t failed = 0;   // keys where tuning or the warm-up run failed
  size_t skipped = 0;  // keys not in the table and not tuned (tune_missing off, or over max_seconds)
  double seconds = 0;
  std::vector<BucketResult> results;  // of the keys tuned now
  std::vector<std::string> errors;
};

WarmupStats run_warmup(const WarmupPlan& plan, const std::vector<TunableOp*>& ops, TuningTable& table,
                       const WarmupOptions& opt = {});

// The whole start-up sequence for a set of ops on one device (what `dsa tune` runs, and what
// the engine runs before it reports ready): load the cache into `table` (skipping families
// whose signature changed), build the plan, run it, save what was tuned.
struct TuneReport {
  CacheLoadReport load;
  CacheSaveReport save;
  WarmupPlan plan;
  WarmupStats stats;
  size_t distinct_buckets = 0;
  bool ok() const { return save.ok && stats.failed == 0; }
};
// `on_start` (optional) sees the load report and the plan before the run starts.
TuneReport load_tune_and_save(const std::vector<TunableOp*>& ops, const EngineLimits& limits, TuningCache& cache,
                              TuningTable& table, WarmupOptions opt = {},
                              const std::function<void(const TuneReport&)>& on_start = {});

}  // namespace dsa::tune
