#include "dsa/tune/tuning_cache.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <ctime>
#include <optional>

#include "dsa/core/error.h"
#include "dsa/core/log.h"
#include "dsa/tune/file_lock.h"

namespace dsa::tune {
namespace fs = std::filesystem;

namespace {

constexpr const char* kFormat = "dsa-tuning-cache";
constexpr uint64_t kMaxCacheFileBytes = 64u << 20;  // a real cache holds a few hundred entries (< 1 MiB)

// State of one cache file as read from disk.
enum class FileState {
  Missing,     // no such file
  Ok,          // valid, and its metadata is ours
  Corrupt,     // not JSON, truncated, or not our schema: moved aside
  OtherStack,  // valid but written for other metadata (or a newer format): left untouched
  Unreadable,  // exists but cannot be read (permissions): left untouched
};

struct FileRead {
  FileState state = FileState::Missing;
  nlohmann::json doc;
  std::string why;  // for Corrupt / OtherStack / Unreadable
};

TunedEntry entry_from_json(const nlohmann::json& j) {
  DSA_CHECK(j.is_object(), "entry is not an object");
  DSA_CHECK(j.contains("tactic") && j["tactic"].is_number_integer(), "entry has no integer 'tactic'");
  DSA_CHECK(j.contains("description") && j["description"].is_string(), "entry has no string 'description'");
  DSA_CHECK(j.contains("us") && j["us"].is_number(), "entry has no number 'us'");
  TunedEntry e;
  e.tactic = j["tactic"].get<int>();
  DSA_CHECK(e.tactic >= kDefaultTactic, "entry tactic {} is below the default tactic -1", e.tactic);
  e.description = j["description"].get<std::string>();
  e.us = j["us"].get<double>();
  if (j.contains("default_us") && j["default_us"].is_number()) e.default_us = j["default_us"].get<double>();
  if (j.contains("timings_us") && j["timings_us"].is_object()) e.timings_us = j["timings_us"];
  if (j.contains("tuned_at") && j["tuned_at"].is_string()) e.tuned_at = j["tuned_at"].get<std::string>();
  return e;
}

nlohmann::json entry_to_json(const TunedEntry& e) {
  return {{"tactic", e.tactic},       {"description", e.description}, {"us", e.us},
          {"default_us", e.default_us}, {"timings_us", e.timings_us},   {"tuned_at", e.tuned_at}};
}

// Checks the whole schema so that a file that parses but is damaged counts as corrupt.
void validate_ops(const nlohmann::json& ops) {
  DSA_CHECK(ops.is_object(), "'ops' is not an object");
  for (const auto& [family, f] : ops.items()) {
    DSA_CHECK(f.is_object(), "ops.{} is not an object", family);
    DSA_CHECK(f.contains("signature") && f["signature"].is_string(), "ops.{} has no string 'signature'", family);
    DSA_CHECK(f.contains("entries") && f["entries"].is_object(), "ops.{} has no object 'entries'", family);
    for (const auto& [key, e] : f["entries"].items()) {
      try {
        entry_from_json(e);
      } catch (const Error& err) {
        fail("ops.{}.entries[{}]: {}", family, key, err.what());
      }
    }
  }
}

FileRead read_file(const fs::path& p, const CacheMetadata& ours) {
  FileRead r;
  // open() first: a file renamed away by another process between a check and the open is
  // simply missing, not unreadable.
  // O_NONBLOCK and the regular-file check: a FIFO in the cache's place is refused, not waited on.
  int fd = ::open(p.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    if (errno == ENOENT) return r;
    r.state = FileState::Unreadable;
    r.why = fmt::format("cannot be read: {}", std::strerror(errno));
    return r;
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || static_cast<uint64_t>(st.st_size) > kMaxCacheFileBytes) {
    r.state = FileState::Unreadable;
    r.why = !S_ISREG(st.st_mode) ? "is not a regular file"
                                 : fmt::format("is larger than {} bytes", kMaxCacheFileBytes);
    ::close(fd);
    return r;
  }
  std::string raw;
  char buf[65536];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      r.state = FileState::Unreadable;
      r.why = fmt::format("cannot be read: {}", std::strerror(errno));
      ::close(fd);
      return r;
    }
    if (n == 0) break;
    raw.append(buf, static_cast<size_t>(n));
    if (raw.size() > kMaxCacheFileBytes) {  // grew while being read
      r.state = FileState::Unreadable;
      r.why = fmt::format("is larger than {} bytes", kMaxCacheFileBytes);
      ::close(fd);
      return r;
    }
  }
  ::close(fd);
  nlohmann::json doc = nlohmann::json::parse(raw, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) {
    r.state = FileState::Corrupt;
    r.why = raw.empty() ? "empty file" : fmt::format("not valid JSON ({} bytes; truncated?)", raw.size());
    return r;
  }
  try {
    DSA_CHECK(doc.is_object(), "top level is not an object");
    DSA_CHECK(doc.contains("format") && doc["format"] == kFormat, "'format' is not \"{}\"", kFormat);
    DSA_CHECK(doc.contains("format_version") && doc["format_version"].is_number_integer(),
              "no integer 'format_version'");
    int version = doc["format_version"].get<int>();
    if (version != kCacheFormatVersion) {
      r.state = FileState::OtherStack;
      r.why = fmt::format("format_version {} (this dsa reads {})", version, kCacheFormatVersion);
      return r;
    }
    DSA_CHECK(doc.contains("metadata"), "no 'metadata'");
    CacheMetadata meta = CacheMetadata::from_json(doc["metadata"]);
    DSA_CHECK(doc.contains("ops"), "no 'ops'");
    validate_ops(doc["ops"]);
    if (meta != ours) {
      r.state = FileState::OtherStack;
      r.why = meta.diff(ours);
      return r;
    }
  } catch (const Error& e) {
    r.state = FileState::Corrupt;
    r.why = e.what();
    return r;
  }
  r.state = FileState::Ok;
  r.doc = std::move(doc);
  return r;
}

std::string utc_stamp(bool compact) {
  auto now = std::chrono::system_clock::now();
  std::time_t t = std::chrono::system_clock::to_time_t(now);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, compact ? "%Y%m%dT%H%M%SZ" : "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

// Renames a corrupt file out of the way (never deletes it: a user may want to look at it).
fs::path move_aside(const fs::path& p) {
  fs::path target = p;
  target += ".corrupt-" + utc_stamp(true);
  std::error_code ec;
  for (int i = 1; fs::exists(target, ec); ++i) {
    target = p;
    target += fmt::format(".corrupt-{}-{}", utc_stamp(true), i);
  }
  fs::rename(p, target, ec);
  if (ec) fail("cannot move corrupt tuning cache {} aside: {}", p.string(), ec.message());
  return target;
}

// Writes `text` to a temp file in the directory of `target`, fsyncs it, renames it over
// `target` and fsyncs the directory: readers see the old file or the new one, never a mix.
void write_atomically(const fs::path& target, const std::string& text) {
  static std::atomic<int> counter{0};
  fs::path tmp = target.parent_path() /
                 fmt::format(".{}.tmp-{}-{}", target.filename().string(), ::getpid(), counter++);
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) fail("cannot create {}: {}", tmp.string(), std::strerror(errno));
  size_t done = 0;
  while (done < text.size()) {
    ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      int e = errno;
      ::close(fd);
      ::unlink(tmp.c_str());
      fail("cannot write {}: {}", tmp.string(), std::strerror(e));
    }
    done += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    int e = errno;
    ::unlink(tmp.c_str());
    fail("cannot flush {}: {}", tmp.string(), std::strerror(e));
  }
  if (::rename(tmp.c_str(), target.c_str()) != 0) {
    int e = errno;
    ::unlink(tmp.c_str());
    fail("cannot rename {} to {}: {}", tmp.string(), target.string(), std::strerror(e));
  }
  int dfd = ::open(target.parent_path().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
}

// Which file this process uses, and what is in it.
struct Resolved {
  fs::path target;
  FileRead read;  // of target
  bool primary_mismatch = false;
  std::string primary_why;
  fs::path moved_aside;
  bool refuse = false;  // even the fallback holds other metadata: write nothing
  std::string refuse_why;
};

}  // namespace

TuningCache::TuningCache(fs::path dir, CacheMetadata meta) : dir_(std::move(dir)), meta_(std::move(meta)) {}

TuningCache TuningCache::for_device(int index) { return TuningCache(default_cache_dir(), current_device_metadata(index)); }

fs::path TuningCache::primary_path() const { return dir_ / fmt::format("tuning-{}.json", meta_.device_kind_slug()); }
fs::path TuningCache::fallback_path() const {
  return dir_ / fmt::format("tuning-{}-{}.json", meta_.device_kind_slug(), meta_.hash8());
}
fs::path TuningCache::lock_path() const {
  fs::path p = primary_path();
  p += ".lock";
  return p;
}

namespace {

Resolved resolve(const TuningCache& c, bool locked) {
  Resolved res;
  auto handle_corrupt = [&](const fs::path& p, FileRead& r) {
    if (r.state != FileState::Corrupt) return;
    std::optional<FileLock> lock;
    if (!locked) lock.emplace(c.lock_path());
    r = read_file(p, c.metadata());  // another process may have replaced it meanwhile
    if (r.state != FileState::Corrupt) return;
    std::string why = r.why;
    res.moved_aside = move_aside(p);
    log_warn("tuning cache {} is corrupt ({}); moved it to {} and continuing without it", p.string(), why,
             res.moved_aside.string());
    r = FileRead{};
  };
  auto use_fallback = [&] {
    res.target = c.fallback_path();
    res.read = read_file(res.target, c.metadata());
    handle_corrupt(res.target, res.read);
    if (res.read.state == FileState::OtherStack || res.read.state == FileState::Unreadable) {
      res.refuse = true;
      res.refuse_why = fmt::format("{} {}", res.target.string(), res.read.why);
    }
  };
  FileRead primary = read_file(c.primary_path(), c.metadata());
  handle_corrupt(c.primary_path(), primary);
  std::error_code ec;
  if (primary.state == FileState::OtherStack || primary.state == FileState::Unreadable) {
    res.primary_mismatch = true;
    res.primary_why = primary.why;
    use_fallback();
  } else if (primary.state == FileState::Missing && fs::exists(c.fallback_path(), ec)) {
    use_fallback();
  } else {
    res.target = c.primary_path();
    res.read = std::move(primary);
  }
  return res;
}

}  // namespace

CacheLoadReport TuningCache::load(TuningTable& table, const std::map<std::string, std::string>& signatures) {
  CacheLoadReport rep;
  Resolved res;
  try {
    res = resolve(*this, /*locked=*/false);
  } catch (const Error& e) {
    rep.message = fmt::format("tuning cache in {} not usable: {}", dir_.string(), e.what());
    log_warn("{}", rep.message);
    return rep;
  }
  rep.path = res.target;
  rep.primary_mismatch = res.primary_mismatch;
  rep.moved_aside = res.moved_aside;
  if (res.primary_mismatch)
    log_warn_once("tune-mismatch:" + primary_path().string(),
                  fmt::format("tuning cache {} was written for another setup ({}); ignoring it and leaving it "
                              "unchanged; this process uses {}",
                              primary_path().string(), res.primary_why, res.target.string()));
  if (res.refuse) {
    rep.message = fmt::format("tuning cache {} also holds other metadata; it is ignored and will not be written",
                              res.refuse_why);
    log_warn("{}", rep.message);
    return rep;
  }
  if (!res.moved_aside.empty()) rep.status = CacheLoadReport::Status::Corrupt;
  if (res.read.state != FileState::Ok) {
    if (rep.message.empty())
      rep.message = res.moved_aside.empty() ? fmt::format("no tuning cache yet at {}", res.target.string())
                                            : fmt::format("corrupt tuning cache moved to {}", res.moved_aside.string());
    return rep;
  }
  rep.status = CacheLoadReport::Status::Loaded;
  for (const auto& [family, f] : res.read.doc["ops"].items()) {
    const std::string sig = f["signature"].get<std::string>();
    auto want = signatures.find(family);
    if (want != signatures.end() && want->second != sig) {
      rep.ignored_entries += f["entries"].size();
      log_info("tuning cache: {} entries of {} were tuned for tactic set '{}', this build has '{}': ignoring them",
               f["entries"].size(), family, sig, want->second);
      continue;
    }
    for (const auto& [key, e] : f["entries"].items()) {
      table.load_entry(family, sig, key, entry_from_json(e));
      ++rep.entries;
    }
  }
  rep.message = fmt::format("loaded {} tuned entries from {}", rep.entries, res.target.string());
  return rep;
}

CacheSaveReport TuningCache::save(const TuningTable& table) {
  CacheSaveReport rep;
  try {
    fs::create_directories(dir_);
    FileLock lock(lock_path());
    Resolved res = resolve(*this, /*locked=*/true);
    rep.path = res.target;
    if (res.primary_mismatch)
      log_warn_once("tune-mismatch:" + primary_path().string(),
                    fmt::format("tuning cache {} was written for another setup ({}); leaving it unchanged and "
                                "writing {}",
                                primary_path().string(), res.primary_why, res.target.string()));
    if (res.refuse) fail("not writing the tuning cache: {} holds other metadata", res.refuse_why);
    nlohmann::json doc;
    if (res.read.state == FileState::Ok) doc = std::move(res.read.doc);
    else doc = {{"ops", nlohmann::json::object()}};
    doc["format"] = kFormat;
    doc["format_version"] = kCacheFormatVersion;
    doc["metadata"] = meta_.to_json();
    auto& ops = doc["ops"];
    for (const auto& [family, f] : table.snapshot()) {
      if (f.ours.empty()) continue;
      if (!ops.contains(family) || ops[family]["signature"] != f.signature) {
        if (ops.contains(family))
          log_info("tuning cache: replacing {} entries of {} (tactic set '{}') with entries for '{}'",
                   ops[family]["entries"].size(), family, ops[family]["signature"].get<std::string>(), f.signature);
        ops[family] = {{"signature", f.signature}, {"entries", nlohmann::json::object()}};
      }
      for (const auto& [key, _] : f.ours) {
        ops[family]["entries"][key] = entry_to_json(f.entries.at(key));
        ++rep.written;
      }
    }
    for (const auto& [_, f] : ops.items()) rep.total += f["entries"].size();
    if (rep.written > 0) write_atomically(res.target, doc.dump(1) + "\n");
    rep.ok = true;
  } catch (const std::exception& e) {
    rep.ok = false;
    rep.error = e.what();
    log_warn("tuning cache not saved: {}", rep.error);
  }
  return rep;
}

std::string utc_now_iso() { return utc_stamp(false); }

}  // namespace dsa::tune
