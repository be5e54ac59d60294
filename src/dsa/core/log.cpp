#include "dsa/core/log.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <set>

namespace dsa {

std::optional<LogLevel> parse_log_level(const std::string& name) {
  if (name == "debug") return LogLevel::Debug;
  if (name == "info") return LogLevel::Info;
  if (name == "warn") return LogLevel::Warn;
  if (name == "error") return LogLevel::Error;
  return std::nullopt;
}

namespace {
std::atomic<int>& level_store() {
  static std::atomic<int> level = [] {
    const char* v = std::getenv("DSA_LOG_LEVEL");
    return static_cast<int>(parse_log_level(v ? v : "info").value_or(LogLevel::Info));
  }();
  return level;
}
}  // namespace

LogLevel log_level() { return static_cast<LogLevel>(level_store().load(std::memory_order_relaxed)); }

void set_log_level(LogLevel level) { level_store().store(static_cast<int>(level), std::memory_order_relaxed); }

void log_write(LogLevel level, const std::string& msg) {
  static std::mutex mu;
  static const char* names[] = {"debug", "info", "warn", "error"};
  std::lock_guard<std::mutex> lock(mu);
  std::fprintf(stderr, "[dsa %s] %s\n", names[static_cast<int>(level)], msg.c_str());
}

void log_warn_once(const std::string& key, const std::string& msg) {
  static std::mutex mu;
  static std::set<std::string> seen;
  {
    std::lock_guard<std::mutex> lock(mu);
    if (!seen.insert(key).second) return;
  }
  if (log_level() <= LogLevel::Warn) log_write(LogLevel::Warn, msg);
}

}  // namespace dsa
