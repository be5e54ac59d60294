// UTF-8 helpers of the tokenizer: lossy validation (invalid bytes -> U+FFFD per maximal invalid
// subpart, as Rust's String::from_utf8_lossy), code point encode, and character stepping.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace dsa::tok {

// Length of the valid UTF-8 sequence starting at s[i], or 0 when s[i..] is not one; *cp gets
// the code point when valid.
size_t utf8_valid_len(std::string_view s, size_t i, uint32_t* cp = nullptr);

// s with every maximal invalid subpart replaced by U+FFFD; s itself when it is valid.
std::string utf8_lossy(std::string_view s);

void utf8_append(std::string& out, uint32_t cp);

// Length of the character at s[i] in a valid UTF-8 string (1 for stray bytes).
inline size_t utf8_char_len(std::string_view s, size_t i) {
  unsigned char c = static_cast<unsigned char>(s[i]);
  size_t n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 1;
  return i + n <= s.size() ? n : 1;
}

// Decodes the character at s[i] of a valid UTF-8 string.
uint32_t utf8_decode_at(std::string_view s, size_t i);

}  // namespace dsa::tok
