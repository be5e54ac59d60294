#include "dsa/tune/tuner.h"

#include <set>

#include "dsa/core/log.h"
#include "dsa/tune/tuning_cache.h"

namespace dsa::tune {

std::vector<Tactic> tactics_to_try(const TunableOp& op, const Dims& dims) {
  std::vector<Tactic> out{Tactic{kDefaultTactic, "default"}};
  std::set<int> seen{kDefaultTactic};
  for (auto& t : op.tactics(dims)) {
    if (t.id == kDefaultTactic) {
      if (!t.description.empty()) out[0].description = t.description;
      continue;
    }
    DSA_CHECK(t.id >= 0, "tunable op {}: tactic id {} is invalid (ids are -1 or >= 0)", op.name(), t.id);
    if (seen.insert(t.id).second) out.push_back(t);
  }
  return out;
}

namespace {
struct Release {
  TunableOp& op;
  ~Release() {
    try {
      op.release();
    } catch (const std::exception& e) {
      log_warn("tuning {}: release failed: {}", op.name(), e.what());
    }
  }
};
}  // namespace

BucketResult tune_bucket(TunableOp& op, const Dims& bucketed, const TuneOptions& opt) {
  BucketResult r;
  r.family = op.name();
  r.signature = op.signature();
  r.key = op.key(bucketed);
  r.dims = bucketed;
  std::vector<Tactic> tactics;
  try {
    tactics = tactics_to_try(op, bucketed);
    op.prepare(bucketed);
  } catch (const CudaContextLost&) {
    throw;
  } catch (const std::exception& e) {
    r.error = fmt::format("preparing {} {} failed: {}", r.family, r.key, e.what());
    try {
      op.release();
    } catch (...) {
    }
    return r;
  }
  Release release{op};
  for (const auto& t : tactics) {
    r.timings.push_back(time_tactic(op, t, bucketed, opt.timing));
    const auto& tt = r.timings.back();
    if (tt.ok) log_debug("tuning {} {}: tactic {} ({}) {:.2f} us", r.family, r.key, t.id, t.description, tt.median_us);
    else log_debug("tuning {} {}: tactic {} ({}) failed: {}", r.family, r.key, t.id, t.description, tt.error);
  }
  const TacticTiming* best = nullptr;
  const TacticTiming* def = &r.timings[0];
  for (const auto& tt : r.timings)
    if (tt.ok && (!best || tt.median_us < best->median_us)) best = &tt;
  if (!best) {
    r.error = fmt::format("every tactic of {} failed at {} (default: {})", r.family, r.key, def->error);
    return r;
  }
  if (def->ok && best != def && best->median_us > def->median_us * (1.0 - opt.min_gain)) best = def;
  if (!def->ok)
    log_warn("tuning {} {}: the default tactic failed ({}); it must always work, this is a bug in the op", r.family,
             r.key, def->error);
  r.ok = true;
  r.entry.tactic = best->tactic.id;
  r.entry.description = best->tactic.description;
  r.entry.us = best->median_us;
  r.entry.default_us = def->ok ? def->median_us : -1;
  for (const auto& tt : r.timings)
    r.entry.timings_us[std::to_string(tt.tactic.id)] = tt.ok ? nlohmann::json(tt.median_us) : nlohmann::json(nullptr);
  r.entry.tuned_at = utc_now_iso();
  return r;
}

}  // namespace dsa::tune
