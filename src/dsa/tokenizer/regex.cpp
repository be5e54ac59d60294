#include "dsa/tokenizer/regex.h"

#include "dsa/core/error.h"
#include "dsa/tokenizer/utf8.h"

#ifdef DSA_WITH_PCRE2
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#endif

namespace dsa::tok {

#ifdef DSA_WITH_PCRE2

bool regex_available() { return true; }

struct Regex::Impl {
  pcre2_code* code = nullptr;
  bool jit = false;
  ~Impl() {
    if (code) pcre2_code_free(code);
  }
};

Regex::Regex(const std::string& pattern, bool literal, const std::string& what) : impl_(std::make_unique<Impl>()) {
  pcre2_compile_context* cc = pcre2_compile_context_create(nullptr);
  pcre2_set_newline(cc, PCRE2_NEWLINE_LF);
  uint32_t opts = PCRE2_UTF | (literal ? PCRE2_LITERAL : PCRE2_UCP | PCRE2_MULTILINE);  // LITERAL refuses UCP
  int err = 0;
  PCRE2_SIZE off = 0;
  impl_->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(), opts, &err, &off, cc);
  pcre2_compile_context_free(cc);
  if (!impl_->code) {
    PCRE2_UCHAR msg[256];
    pcre2_get_error_message(err, msg, sizeof msg);
    fail("tokenizer: {}: cannot compile regex at offset {}: {} (pattern: {})", what, off,
         reinterpret_cast<const char*>(msg), pattern);
  }
  impl_->jit = pcre2_jit_compile(impl_->code, PCRE2_JIT_COMPLETE) == 0;
}

Regex::~Regex() = default;

std::vector<std::pair<size_t, size_t>> Regex::find_all(std::string_view s) const {
  std::vector<std::pair<size_t, size_t>> out;
  pcre2_match_data* md = pcre2_match_data_create_from_pattern(impl_->code, nullptr);
  auto subject = reinterpret_cast<PCRE2_SPTR>(s.data());
  size_t start = 0;
  while (start <= s.size()) {
    // The subject is valid UTF-8 (the tokenizer makes it so): skip PCRE2's re-check.
    int rc = impl_->jit ? pcre2_jit_match(impl_->code, subject, s.size(), start, PCRE2_NO_UTF_CHECK, md, nullptr)
                        : pcre2_match(impl_->code, subject, s.size(), start, PCRE2_NO_UTF_CHECK, md, nullptr);
    // The JIT's machine stack is small (32 KiB); the interpreter keeps its backtracking on the heap.
    if (rc == PCRE2_ERROR_JIT_STACKLIMIT)
      rc = pcre2_match(impl_->code, subject, s.size(), start, PCRE2_NO_JIT | PCRE2_NO_UTF_CHECK, md, nullptr);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) {
      pcre2_match_data_free(md);
      PCRE2_UCHAR msg[256];
      pcre2_get_error_message(rc, msg, sizeof msg);
      fail("tokenizer: regex match failed: {}", reinterpret_cast<const char*>(msg));
    }
    PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
    size_t b = ov[0], e = ov[1];
    out.emplace_back(b, e);
    if (e > b) {
      start = e;
    } else {
      if (e >= s.size()) break;
      start = e + utf8_char_len(s, e);
    }
  }
  pcre2_match_data_free(md);
  return out;
}

#else  // !DSA_WITH_PCRE2

bool regex_available() { return false; }

struct Regex::Impl {};

Regex::Regex(const std::string&, bool, const std::string& what) {
  fail("tokenizer: {}: dsa was built without PCRE2 (install libpcre2-dev and reconfigure)", what);
}
Regex::~Regex() = default;
std::vector<std::pair<size_t, size_t>> Regex::find_all(std::string_view) const { return {}; }

#endif

}  // namespace dsa::tok
