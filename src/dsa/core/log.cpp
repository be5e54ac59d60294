#include "dsa/core/log.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <set>

namespace dsa {

LogLevel log_level() {
  static const LogLevel level = [] {
    const char* v = std::getenv("DSA_LOG_LEVEL");
    if (!v) return LogLevel::Info;
    if (!std::strcmp(v, "debug")) return LogLevel::Debug;
    if (!std::strcmp(v, "warn")) return LogLevel::Warn;
    if (!std::strcmp(v, "error")) return LogLevel::Error;
    return LogLevel::Info;
  }();
  return level;
}

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
