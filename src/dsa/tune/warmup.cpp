#include "dsa/tune/warmup.h"

#include <chrono>
#include <map>
#include <memory>

#include "dsa/core/log.h"
#include "dsa/core/progress.h"

namespace dsa::tune {

namespace {
// Whether the op still offers the cached tactic at this bucket under the same description.
bool still_offered(const TunableOp& op, const Dims& dims, const TunedEntry& e) {
  if (e.tactic == kDefaultTactic) return true;
  for (const auto& t : op.tactics(dims))
    if (t.id == e.tactic && t.description == e.description) return true;
  return false;
}
}  // namespace

WarmupStats run_warmup(const WarmupPlan& plan, const std::vector<TunableOp*>& ops, TuningTable& table,
                       const WarmupOptions& opt) {
  auto t0 = std::chrono::steady_clock::now();
  WarmupStats st;
  std::unique_ptr<ProgressBar> bar;
  if (opt.progress) bar = std::make_unique<ProgressBar>("dsa tune", plan.items.size());
  auto last_checkpoint = t0;
  auto maybe_checkpoint = [&](bool force) {
    if (!opt.checkpoint) return;
    auto now = std::chrono::steady_clock::now();
    if (!force && std::chrono::duration<double>(now - last_checkpoint).count() < opt.checkpoint_seconds) return;
    last_checkpoint = now;
    opt.checkpoint();
  };
  std::map<std::string, bool> handled;  // key -> ok, for keys seen earlier in this run
  for (const auto& item : plan.items) {
    TunableOp& op = *ops.at(item.op);
    const std::string key = op.key(item.dims);
    const std::string full = op.name() + "/" + key;
    if (bar) bar->advance(0, op.name() + " " + item.label);
    ++st.items;
    auto seen = handled.find(full);
    auto cached = table.find(op.name(), op.signature(), key);
    if (cached && seen == handled.end() && !still_offered(op, item.dims, *cached)) {
      log_info("tuning: cached tactic {} ('{}') of {} {} is not offered any more: tuning it again", cached->tactic,
               cached->description, op.name(), key);
      cached.reset();
    }
    const bool over_budget =
        opt.max_seconds > 0 &&
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() >= opt.max_seconds;
    if (seen == handled.end() && cached && !opt.force) {
      ++st.buckets;
      ++st.found;
      if (!opt.run_found || over_budget) {  // counted, not launched
        handled[full] = true;
        if (bar) bar->advance(1);
        continue;
      }
    }
    if (seen == handled.end() && (!cached || opt.force) && (!opt.tune_missing || over_budget)) {
      ++st.buckets;
      ++st.skipped;
      handled[full] = false;
      if (bar) bar->advance(1);
      continue;
    }
    if (seen == handled.end() && (!cached || opt.force)) {
      ++st.buckets;
      BucketResult r = tune_bucket(op, item.dims, opt.tune);
      handled[full] = r.ok;
      if (r.ok) {
        table.set(r.family, r.signature, r.key, r.entry);
        ++st.tuned;
      } else {
        ++st.failed;
        st.errors.push_back(r.error);
        if (!bar) log_warn("tuning: {}", r.error);  // with a bar, the caller prints st.errors
      }
      st.results.push_back(std::move(r));
      maybe_checkpoint(false);
      if (bar) bar->advance(1);
      continue;  // tuning ran every tactic: the kernels are warm
    }
    if (seen != handled.end()) {  // same bucket as an earlier item: its kernels already ran
      if (bar) bar->advance(1);
      continue;
    }
    // Found in the table: run the chosen tactic once so its first launch happens now.
    const int tactic = cached->tactic;
    std::string err;
    try {
      op.prepare(item.dims);
      err = run_once(op, tactic, item.dims);
    } catch (const CudaContextLost&) {
      throw;
    } catch (const std::exception& e) {
      err = e.what();
    }
    try {
      op.release();
    } catch (const std::exception& e) {
      if (err.empty()) err = e.what();
    }
    if (!err.empty()) {
      std::string msg = fmt::format("warm-up of {} {} (tactic {}) failed: {}", op.name(), item.label, tactic, err);
      if (!bar) log_warn("{}", msg);
      st.errors.push_back(msg);
      --st.found;
      ++st.failed;
    }
    handled[full] = err.empty();
    if (bar) bar->advance(1);
  }
  if (bar) bar->finish();
  if (st.tuned) maybe_checkpoint(true);
  st.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return st;
}

TuneReport load_tune_and_save(const std::vector<TunableOp*>& ops, const EngineLimits& limits, TuningCache& cache,
                              TuningTable& table, WarmupOptions opt,
                              const std::function<void(const TuneReport&)>& on_start) {
  TuneReport rep;
  std::map<std::string, std::string> sigs;
  for (auto* op : ops) sigs[op->name()] = op->signature();
  rep.load = cache.load(table, sigs);
  rep.plan = build_warmup_plan(ops, limits);
  rep.distinct_buckets = rep.plan.unique_keys(ops);
  if (on_start) on_start(rep);
  auto user_checkpoint = opt.checkpoint;
  opt.checkpoint = [&] {
    if (user_checkpoint) user_checkpoint();
    rep.save = cache.save(table);
  };
  rep.stats = run_warmup(rep.plan, ops, table, opt);
  if (rep.stats.tuned == 0) rep.save = cache.save(table);  // nothing new: writes nothing, reports the file
  return rep;
}

}  // namespace dsa::tune
