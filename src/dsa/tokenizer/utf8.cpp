#include "dsa/tokenizer/utf8.h"

namespace dsa::tok {

size_t utf8_valid_len(std::string_view s, size_t i, uint32_t* cp) {
  auto b = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  unsigned char c = b(i);
  if (c < 0x80) {
    if (cp) *cp = c;
    return 1;
  }
  size_t n;
  uint32_t v;
  unsigned char lo = 0x80, hi = 0xBF;  // allowed range of the second byte (Unicode table 3-7)
  if (c >= 0xC2 && c <= 0xDF) {
    n = 2, v = c & 0x1F;
  } else if (c >= 0xE0 && c <= 0xEF) {
    n = 3, v = c & 0x0F;
    if (c == 0xE0) lo = 0xA0;
    if (c == 0xED) hi = 0x9F;  // no surrogates
  } else if (c >= 0xF0 && c <= 0xF4) {
    n = 4, v = c & 0x07;
    if (c == 0xF0) lo = 0x90;
    if (c == 0xF4) hi = 0x8F;
  } else {
    return 0;
  }
  for (size_t k = 1; k < n; ++k) {
    if (i + k >= s.size()) return 0;
    unsigned char d = b(i + k);
    if (k == 1 ? (d < lo || d > hi) : (d < 0x80 || d > 0xBF)) return 0;
    v = (v << 6) | (d & 0x3F);
  }
  if (cp) *cp = v;
  return n;
}

std::string utf8_lossy(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    size_t n = utf8_valid_len(s, i);
    if (n == 0) break;
    i += n;
  }
  if (i == s.size()) return std::string(s);
  std::string out(s.substr(0, i));
  while (i < s.size()) {
    size_t n = utf8_valid_len(s, i);
    if (n) {
      out.append(s.substr(i, n));
      i += n;
      continue;
    }
    // Maximal subpart: the longest prefix of a valid sequence that starts here (at least 1 byte).
    unsigned char c = static_cast<unsigned char>(s[i]);
    size_t need = (c >= 0xC2 && c <= 0xDF) ? 2 : (c >= 0xE0 && c <= 0xEF) ? 3 : (c >= 0xF0 && c <= 0xF4) ? 4 : 1;
    size_t k = 1;
    if (need > 1) {
      unsigned char lo = 0x80, hi = 0xBF;
      if (c == 0xE0) lo = 0xA0;
      if (c == 0xED) hi = 0x9F;
      if (c == 0xF0) lo = 0x90;
      if (c == 0xF4) hi = 0x8F;
      while (k < need && i + k < s.size()) {
        unsigned char d = static_cast<unsigned char>(s[i + k]);
        if (k == 1 ? (d < lo || d > hi) : (d < 0x80 || d > 0xBF)) break;
        ++k;
      }
    }
    out.append("\xEF\xBF\xBD");
    i += k;
  }
  return out;
}

void utf8_append(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

uint32_t utf8_decode_at(std::string_view s, size_t i) {
  uint32_t cp = static_cast<unsigned char>(s[i]);
  utf8_valid_len(s, i, &cp);
  return cp;
}

}  // namespace dsa::tok
