#include "dsa/tune/tuning_table.h"

#include <mutex>

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
  const std::string key = op.key(op.bucket(dims, max_tokens));
  std::string stored_signature;
  {
    std::shared_lock lock(mu_);
    auto it = families_.find(family);
    if (it != families_.end()) {
      stored_signature = it->second.signature;
      if (stored_signature == op.signature()) {
        auto e = it->second.entries.find(key);
        if (e != it->second.entries.end()) return e->second.tactic;
      }
    }
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
}

TuningTable& global_tuning_table() {
  static TuningTable t;
  return t;
}

}  // namespace dsa::tune
