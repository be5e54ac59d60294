// TuningCache: the persistent tuning cache, one JSON file per device kind under the cache
// directory (default_cache_dir()). The cache is always on. File layout (format_version 1):
//
//   {"format": "dsa-tuning-cache", "format_version": 1,
//    "metadata": {dsa_version, cuda_runtime, cuda_driver, device_name, capability,
//                 route_capability, sm_count},
//    "ops": {"<family>": {"signature": "...",
//                         "entries": {"<key>": {"tactic": 3, "description": "splits=4",
//                                               "us": 12.5, "default_us": 20.0,
//                                               "timings_us": {"-1": 20.0, "3": 12.5, "5": null},
//                                               "tuned_at": "2026-11-30T12:00:00Z"}}}}}
//
// Rules (docs/tuning.md explains them):
// - File names: tuning-<device-kind>.json (the primary), e.g. tuning-nvidia-h200-sm90.json.
//   When the primary holds other metadata (another dsa version, driver, ...) it is ignored,
//   with one warning, and left untouched: this process reads and writes
//   tuning-<device-kind>-<metadata-hash>.json instead, so several software stacks on one
//   machine never overwrite each other's tuning and the cache stays on.
// - A corrupt or truncated file (bad JSON, wrong schema) is renamed to
//   <name>.corrupt-<UTC timestamp> with a warning; tuning proceeds as if it were absent.
// - A family whose stored tactic-space signature differs from the op's loses only its own
//   entries (TuningTable ignores them; the next save replaces that family's section).
// - save(): under an exclusive flock on tuning-<device-kind>.json.lock it re-reads the file,
//   merges (entries on disk + this process's entries; ours win on the same key), writes a temp
//   file in the same directory, fsyncs it and renames it over the file. Processes tuning at
//   once lose nothing.
#pragma once
#include <filesystem>
#include <map>
#include <string>

#include "dsa/tune/cache_metadata.h"
#include "dsa/tune/tuning_table.h"

namespace dsa::tune {

inline constexpr int kCacheFormatVersion = 1;

struct CacheLoadReport {
  enum class Status { Missing, Loaded, Corrupt } status = Status::Missing;
  std::filesystem::path path;         // file this process reads and writes
  bool primary_mismatch = false;      // the primary file holds other metadata (left untouched)
  std::filesystem::path moved_aside;  // where a corrupt file went ("" if none)
  size_t entries = 0;                 // entries loaded
  size_t ignored_entries = 0;         // entries skipped: their family's signature changed
  std::string message;                // one line for the user
};

struct CacheSaveReport {
  bool ok = false;
  std::filesystem::path path;
  size_t written = 0;      // our entries written
  size_t total = 0;        // entries in the file after the merge
  std::string error;       // why not, when !ok
};

class TuningCache {
 public:
  TuningCache(std::filesystem::path dir, CacheMetadata meta);
  // The cache of CUDA device `index` under default_cache_dir().
  static TuningCache for_device(int index = 0);

  const std::filesystem::path& dir() const { return dir_; }
  const CacheMetadata& metadata() const { return meta_; }
  std::filesystem::path primary_path() const;
  std::filesystem::path fallback_path() const;
  std::filesystem::path lock_path() const;

  // Reads the cache into `table` (as entries not "ours"). `signatures` (family -> this build's
  // signature) lets it skip and count stale families now; families not listed are loaded and
  // checked at lookup. Never throws for file problems: they end up in the report and the log.
  CacheLoadReport load(TuningTable& table, const std::map<std::string, std::string>& signatures = {});
  // Writes this process's entries of `table` (merged with the disk). Never throws for file
  // problems: ok = false and error say what went wrong (also logged).
  CacheSaveReport save(const TuningTable& table);

 private:
  std::filesystem::path dir_;
  CacheMetadata meta_;
};

// Current UTC time as 2026-11-30T12:00:00Z (the cache's tuned_at).
std::string utc_now_iso();

}  // namespace dsa::tune
