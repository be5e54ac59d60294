#include "dsa/tune/tuning_table.h"

#include <mutex>

#include "dsa/core/error.h"
#include "dsa/core/log.h"

namespace dsa::tune {

void TuningTable::set(const std::string& family, const std::string& signature, const std::string& key,
                      TunedEntry e) {
  std::unique_lock lock(mu_);
  auto& f = families_[family];
  if (f.signature != signature) {
    f.entries.clear();
    f.ours.clear();
    f.signature = signature;
  }
  f.entries[key] = std::move(e);
  f.ours[key] = true;
  checked_.erase(family + "/" + key);
}

void TuningTable::load_entry(const std::string& family, const std::string& signature, const std::string& key,
                             TunedEntry e) {
  std::unique_lock lock(mu_);
  auto it = families_.find(family);
  if (it == families_.end()) {
    it = families_.emplace(family, FamilyEntries{}).first;
    it->second.signature = signature;
  }
  auto& f = it->second;
  if (f.signature != signature) {
    if (!f.ours.empty()) return;  // ours were tuned under our signature: keep them
    f.entries.clear();
    f.signature = signature;
  }
  if (f.ours.count(key)) return;
  f.entries[key] = std::move(e);
  checked_.erase(family + "/" + key);
}

std::optional<TunedEntry> TuningTable::find(const std::string& family, const std::string& signature,
                                            const std::string& key) const {
  std::shared_lock lock(mu_);
  auto it = families_.find(family);
  if (it == families_.end() || it->second.signature != signature) return std::nullopt;
  auto e = it->second.entries.find(key);
  if (e == it->second.entries.end()) return std::nullopt;
  return e->second;
}

int TuningTable::tactic_for(const TunableOp& op, const Dims& dims, int64_t max_tokens) const {
  const std::string family = op.name();
  const Dims bucketed = op.bucket(dims, max_tokens);
  const std::string key = op.key(bucketed);
  const std::string full = family + "/" + key;
  std::string stored_signature;
  std::optional<TunedEntry> hit;
  std::optional<bool> valid;
  {
    std::shared_lock lock(mu_);
    auto it = families_.find(family);
    if (it != families_.end()) {
      stored_signature = it->second.signature;
      if (stored_signature == op.signature()) {
        auto e = it->second.entries.find(key);
        if (e != it->second.entries.end()) hit = e->second;
      }
    }
    auto c = checked_.find(full);
    if (c != checked_.end()) valid = c->second;
  }
  if (hit) {
    if (!valid) {
      // First use of this key: the stored id must still name the same tactic.
      bool ok = false;
      for (const auto& t : op.tactics(bucketed))
        if (t.id == hit->tactic && t.description == hit->description) ok = true;
      if (hit->tactic == kDefaultTactic) ok = true;
      if (!ok)
        log_warn_once("tune-stale:" + full,
                      fmt::format("tuning: cached tactic {} ('{}') for {} {} is not in the op's tactic list any "
                                  "more (signature '{}' should have changed); using the default tactic",
                                  hit->tactic, hit->description, family, key, op.signature()));
      std::unique_lock lock(mu_);
      checked_[full] = ok;
      valid = ok;
    }
    if (*valid) return hit->tactic;
    return kDefaultTactic;
  }
  if (!stored_signature.empty() && stored_signature != op.signature())
    log_warn_once("tune-signature:" + family,
                  fmt::format("tuning: cached tactics for {} were tuned for another tactic set (signature '{}', "
                              "this build has '{}'); using the default tactic until `dsa tune` runs again",
                              family, stored_signature, op.signature()));
  else
    log_warn_once("tune-miss:" + family,
                  fmt::format("tuning: {} has no tuned tactic for {} (and maybe other shapes); using the default "
                              "tactic. Run `dsa tune --model ...` to tune this device",
                              family, key));
  log_debug("tuning: {} untuned bucket {} -> default tactic", family, key);
  return kDefaultTactic;
}

int TuningTable::tactic_for(const TunableOp& op, const Dims& dims) const {
  int64_t max = max_batched_tokens();
  DSA_CHECK(max >= 1, "tuning: the engine's max batched tokens were not set (set_max_batched_tokens)");
  return tactic_for(op, dims, max);
}

void TuningTable::set_max_batched_tokens(int64_t n) {
  DSA_CHECK(n >= 1, "max batched tokens must be >= 1, got {}", n);
  std::unique_lock lock(mu_);
  max_batched_tokens_ = n;
}

int64_t TuningTable::max_batched_tokens() const {
  std::shared_lock lock(mu_);
  return max_batched_tokens_;
}

std::map<std::string, FamilyEntries> TuningTable::snapshot() const {
  std::shared_lock lock(mu_);
  return families_;
}

size_t TuningTable::size() const {
  std::shared_lock lock(mu_);
  size_t n = 0;
  for (const auto& [_, f] : families_) n += f.entries.size();
  return n;
}

size_t TuningTable::ours_count() const {
  std::shared_lock lock(mu_);
  size_t n = 0;
  for (const auto& [_, f] : families_) n += f.ours.size();
  return n;
}

void TuningTable::clear() {
  std::unique_lock lock(mu_);
  families_.clear();
  checked_.clear();
}

TuningTable& global_tuning_table() {
  static TuningTable t;
  return t;
}

}  // namespace dsa::tune
