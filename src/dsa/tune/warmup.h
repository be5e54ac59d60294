// Runs a warm-up plan: each item whose bucket is in the table (and --force is off) is "found"
// and its chosen tactic runs once (so first-launch costs such as lazy module loading are paid
// now); every other bucket is tuned and its choice recorded in the table. Failures are
// counted and described, never thrown (except a CUDA context lost for good).
#pragma once
#include <string>
#include <vector>

#include "dsa/tune/tuner.h"
#include "dsa/tune/tuning_table.h"
#include "dsa/tune/warmup_plan.h"

namespace dsa::tune {

struct WarmupOptions {
  TuneOptions tune;
  bool force = false;     // re-tune buckets that are in the table
  bool progress = false;  // progress bar on stderr
};

struct WarmupStats {
  size_t items = 0;    // plan items run
  size_t buckets = 0;  // distinct (op, bucket) keys
  size_t tuned = 0;    // keys tuned now
  size_t found = 0;    // keys already in the table
  size_t failed = 0;   // keys where tuning or the warm-up run failed
  double seconds = 0;
  std::vector<BucketResult> results;  // of the keys tuned now
  std::vector<std::string> errors;
};

WarmupStats run_warmup(const WarmupPlan& plan, const std::vector<TunableOp*>& ops, TuningTable& table,
                       const WarmupOptions& opt = {});

}  // namespace dsa::tune
