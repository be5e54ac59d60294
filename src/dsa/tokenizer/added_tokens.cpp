#include "dsa/tokenizer/added_tokens.h"

#include <algorithm>
#include <cstdint>

#include "dsa/core/error.h"
#include "dsa/tokenizer/utf8.h"

namespace dsa::tok {
namespace {

// Rust's char::is_whitespace (Unicode White_Space).
bool is_space_cp(uint32_t c) {
  return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200A) ||
         c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

// Word character for single_word (ASCII alphanumerics and '_'; non-ASCII letters count as word
// characters too, approximating Rust's char::is_alphanumeric).
bool is_word_cp(uint32_t c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
         (c >= 0x80 && !is_space_cp(c));
}

// Start of the character that ends at byte `end` (exclusive) of valid UTF-8.
size_t prev_char_start(std::string_view s, size_t end) {
  size_t i = end - 1;
  while (i > 0 && (static_cast<unsigned char>(s[i]) & 0xC0) == 0x80) --i;
  return i;
}

}  // namespace

AddedTokens::AddedTokens(const nlohmann::json& added) {
  if (added.is_null()) return;
  DSA_CHECK(added.is_array(), "tokenizer: added_tokens: expected an array");
  for (size_t i = 0; i < added.size(); ++i) {
    const auto& a = added[i];
    DSA_CHECK(a.is_object() && a.contains("id") && a["id"].is_number_integer() && a["id"].get<int64_t>() >= 0 &&
                  a["id"].get<int64_t>() < INT32_MAX,
              "tokenizer: added_tokens[{}].id: missing or not a non-negative 32-bit integer", i);
    DSA_CHECK(a.contains("content") && a["content"].is_string() && !a["content"].get<std::string>().empty(),
              "tokenizer: added_tokens[{}].content: missing, not a string or empty", i);
    AddedToken t;
    t.id = a["id"].get<int32_t>();
    t.content = a["content"];
    t.special = a.value("special", false);
    t.normalized = a.value("normalized", !t.special);
    t.lstrip = a.value("lstrip", false);
    t.rstrip = a.value("rstrip", false);
    t.single_word = a.value("single_word", false);
    tokens_.push_back(std::move(t));
  }
  for (size_t i = 0; i < tokens_.size(); ++i) {
    auto& m = tokens_[i].normalized ? normalized_ : raw_;
    m.by_first[static_cast<unsigned char>(tokens_[i].content[0])].push_back(i);
  }
  for (auto* m : {&raw_, &normalized_})
    for (auto& [c, v] : m->by_first)
      std::stable_sort(v.begin(), v.end(),
                       [&](size_t x, size_t y) { return tokens_[x].content.size() > tokens_[y].content.size(); });
}

void AddedTokens::split_with(const Matcher& m, std::string_view text, std::vector<TextSegment>& out) const {
  if (m.empty()) {
    if (!text.empty()) out.push_back({text, -1});
    return;
  }
  size_t emitted = 0;  // text[..emitted] is already in out
  size_t i = 0;
  while (i < text.size()) {
    auto bucket = m.by_first.find(static_cast<unsigned char>(text[i]));
    const AddedToken* hit = nullptr;
    if (bucket != m.by_first.end())
      for (size_t k : bucket->second)
        if (text.compare(i, tokens_[k].content.size(), tokens_[k].content) == 0) {
          hit = &tokens_[k];
          break;
        }
    if (!hit) {
      i += utf8_char_len(text, i);
      continue;
    }
    size_t b = i, e = i + hit->content.size();
    if (hit->single_word) {
      bool ok_left = b == 0 || !is_word_cp(utf8_decode_at(text, prev_char_start(text, b)));
      bool ok_right = e == text.size() || !is_word_cp(utf8_decode_at(text, e));
      if (!ok_left || !ok_right) {
        i = e;  // the match is consumed (non-overlapping search), not replaced by a shorter one
        continue;
      }
    }
    if (hit->lstrip)
      while (b > emitted) {
        size_t p = prev_char_start(text, b);
        if (!is_space_cp(utf8_decode_at(text, p))) break;
        b = p;
      }
    if (hit->rstrip)
      while (e < text.size() && is_space_cp(utf8_decode_at(text, e))) e += utf8_char_len(text, e);
    if (b > emitted) out.push_back({text.substr(emitted, b - emitted), -1});
    out.push_back({text.substr(b, e - b), hit->id});
    emitted = i = e;
  }
  if (emitted < text.size()) out.push_back({text.substr(emitted), -1});
}

std::vector<TextSegment> AddedTokens::split(std::string_view text) const {
  std::vector<TextSegment> first, out;
  split_with(raw_, text, first);
  for (const auto& s : first) {
    if (s.id >= 0)
      out.push_back(s);
    else
      split_with(normalized_, s.text, out);
  }
  return out;
}

}  // namespace dsa::tok
