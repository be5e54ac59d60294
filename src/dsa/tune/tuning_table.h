// TuningTable: the in-memory tactic choices, per kernel family and shape key, that ops consult
// at run time. Entries come from the cache file (tuning_cache.h) or from this process's tuning
// (then they are "ours" and the next save writes them). Thread-safe.
//
// Each family's entries belong to one tactic-space signature. A lookup by an op whose
// signature differs from the stored one finds nothing (and says so once): entries from another
// tactic set are never used.
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <shared_mutex>
#include <string>

#include <nlohmann/json.hpp>

#include "dsa/tune/tunable_op.h"

namespace dsa::tune {

struct TunedEntry {
  int tactic = kDefaultTactic;
  std::string description;   // the tactic's readable form
  double us = 0;             // median time of the chosen tactic
  double default_us = -1;    // median time of the default tactic (-1: it failed)
  nlohmann::json timings_us = nlohmann::json::object();  // tactic id -> median us, null = failed
  std::string tuned_at;      // UTC, ISO 8601
};

struct FamilyEntries {
  std::string signature;
  std::map<std::string, TunedEntry> entries;  // key -> entry
  std::map<std::string, bool> ours;           // keys tuned by this process (written on save)
};

class TuningTable {
 public:
  // Records a tuning result of this process. When `signature` differs from the family's
  // stored one, the family's old entries are dropped first.
  void set(const std::string& family, const std::string& signature, const std::string& key, TunedEntry e);
  // Adds an entry read from disk (not ours): never replaces one of ours.
  void load_entry(const std::string& family, const std::string& signature, const std::string& key, TunedEntry e);

  // Entry for (family, key) under `signature`; nullopt when missing or under another signature.
  std::optional<TunedEntry> find(const std::string& family, const std::string& signature,
                                 const std::string& key) const;

  // Run-time lookup: the tuned tactic for `dims` (unbucketed) of `op`, else the default with
  // one warning per family and process. max_tokens: the engine's max batched tokens.
  // The first time a key is used, its stored tactic is checked against the op's tactic list at
  // that bucket (same id, same description): a mismatch (the tactic set changed but the
  // signature did not) is warned about once and the default is used, never a wrong tactic.
  int tactic_for(const TunableOp& op, const Dims& dims, int64_t max_tokens) const;
  // Same, with the limit given by set_max_batched_tokens() (the engine sets it at start-up).
  int tactic_for(const TunableOp& op, const Dims& dims) const;
  void set_max_batched_tokens(int64_t n);
  int64_t max_batched_tokens() const;

  std::map<std::string, FamilyEntries> snapshot() const;
  size_t size() const;
  size_t ours_count() const;
  void clear();

 private:
  mutable std::shared_mutex mu_;
  std::map<std::string, FamilyEntries> families_;
  mutable std::map<std::string, bool> checked_;  // family/key -> stored tactic is valid
  int64_t max_batched_tokens_ = 0;
};

// The process-wide table that start-up fills from the cache and the tuner (`dsa tune`,
// warm_up_for_model). The ops consult a copy of it through the active tactic chooser
// (active_tuning.h), installed by warm_up_for_model.
TuningTable& global_tuning_table();

}  // namespace dsa::tune
