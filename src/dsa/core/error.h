// dsa::Error: the one exception type of the engine. Messages name what is wrong (file, tensor,
// field, value) so that a user can act on them without reading the source.
#pragma once
#include <stdexcept>
#include <string>

#include <fmt/format.h>

namespace dsa {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

template <typename... Args>
[[noreturn]] inline void fail(fmt::format_string<Args...> f, Args&&... args) {
  throw Error(fmt::format(f, std::forward<Args>(args)...));
}

}  // namespace dsa

// DSA_CHECK(cond, "format {}", args...): throws dsa::Error with the formatted message.
#define DSA_CHECK(cond, ...)          \
  do {                                \
    if (!(cond)) ::dsa::fail(__VA_ARGS__); \
  } while (0)
