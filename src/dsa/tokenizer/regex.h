// Compiled split pattern of the tokenizer: PCRE2 (8-bit, UTF, UCP, JIT when available) standing
// in for the Oniguruma regexes of `tokenizers`. Compiled with Ruby-like semantics: `^`/`$` match
// at line breaks (multiline; newline is LF only), \s \d \w and POSIX classes are Unicode-aware.
// A literal pattern ({"String": ...} in tokenizer.json) is matched as plain text.
#pragma once
#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace dsa::tok {

class Regex {
 public:
  // Throws dsa::Error naming `what` (the JSON field) and PCRE2's message when compilation fails,
  // or when dsa was built without PCRE2.
  Regex(const std::string& pattern, bool literal, const std::string& what);
  ~Regex();
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;

  // Non-overlapping matches, left to right, as [begin, end) byte offsets into a valid UTF-8
  // string. After an empty match the search resumes one character later (as Oniguruma's
  // iterator does).
  std::vector<std::pair<size_t, size_t>> find_all(std::string_view s) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

bool regex_available();

}  // namespace dsa::tok
