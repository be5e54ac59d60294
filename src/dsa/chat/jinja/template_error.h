// TemplateError: every error of the Jinja engine (syntax, undefined values misused, type errors,
// unsupported constructs, raise_exception(), limits). A dsa::Error whose message names the
// template line ("chat template line 12: ..."); errors raised where the line is not known yet
// (inside filters and methods) get it from the expression being evaluated.
#pragma once
#include <string>

#include <fmt/format.h>

#include "dsa/core/error.h"

namespace dsa::jinja {

class TemplateError : public Error {
 public:
  explicit TemplateError(std::string message, int line = 0);
  const std::string& message() const { return message_; }
  int line() const { return line_; }

 private:
  std::string message_;
  int line_;
};

template <typename... Args>
[[noreturn]] void raise(int line, fmt::format_string<Args...> f, Args&&... args) {
  throw TemplateError(fmt::format(f, std::forward<Args>(args)...), line);
}

template <typename... Args>
[[noreturn]] void raise(fmt::format_string<Args...> f, Args&&... args) {
  throw TemplateError(fmt::format(f, std::forward<Args>(args)...), 0);
}

}  // namespace dsa::jinja
