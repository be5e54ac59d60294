// Minimal leveled logging to stderr. DSA_LOG_LEVEL = debug|info|warn|error (default info);
// set_log_level overrides it (e.g. `dsa serve --log-level`).
#pragma once
#include <optional>
#include <string>

#include <fmt/format.h>

namespace dsa {

enum class LogLevel { Debug = 0, Info = 1, Warn = 2, Error = 3 };
LogLevel log_level();
void set_log_level(LogLevel level);
// "debug", "info", "warn", "error"; nullopt for anything else.
std::optional<LogLevel> parse_log_level(const std::string& name);
void log_write(LogLevel level, const std::string& msg);
// Logs `msg` at warning level only the first time `key` is seen in this process.
void log_warn_once(const std::string& key, const std::string& msg);

template <typename... A>
void log_debug(fmt::format_string<A...> f, A&&... a) {
  if (log_level() <= LogLevel::Debug) log_write(LogLevel::Debug, fmt::format(f, std::forward<A>(a)...));
}
template <typename... A>
void log_info(fmt::format_string<A...> f, A&&... a) {
  if (log_level() <= LogLevel::Info) log_write(LogLevel::Info, fmt::format(f, std::forward<A>(a)...));
}
template <typename... A>
void log_warn(fmt::format_string<A...> f, A&&... a) {
  if (log_level() <= LogLevel::Warn) log_write(LogLevel::Warn, fmt::format(f, std::forward<A>(a)...));
}
template <typename... A>
void log_error(fmt::format_string<A...> f, A&&... a) {
  log_write(LogLevel::Error, fmt::format(f, std::forward<A>(a)...));
}

}  // namespace dsa
