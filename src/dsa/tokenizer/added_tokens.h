// Added tokens of tokenizer.json ("added_tokens": [{id, content, special, normalized, lstrip,
// rstrip, single_word}]): strings cut out of the text before pre-tokenization, each becoming its
// own id. As in `tokenizers`, tokens with normalized=false are matched first (leftmost-longest),
// then the others in the remaining text; lstrip/rstrip swallow whitespace beside a match,
// single_word rejects matches touching a word character.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

namespace dsa::tok {

struct AddedToken {
  int32_t id = -1;
  std::string content;
  bool special = false;
  bool normalized = true;
  bool lstrip = false, rstrip = false, single_word = false;
};

// A stretch of text: either an added token (id >= 0) or plain text to pre-tokenize (id == -1).
struct TextSegment {
  std::string_view text;
  int32_t id = -1;
};

class AddedTokens {
 public:
  AddedTokens() = default;
  explicit AddedTokens(const nlohmann::json& added);  // the "added_tokens" array (or null)

  std::vector<TextSegment> split(std::string_view text) const;

  const std::vector<AddedToken>& tokens() const { return tokens_; }

 private:
  struct Matcher {
    // First byte -> indices into tokens_, longest content first.
    std::unordered_map<unsigned char, std::vector<size_t>> by_first;
    bool empty() const { return by_first.empty(); }
  };
  void split_with(const Matcher& m, std::string_view text, std::vector<TextSegment>& out) const;

  std::vector<AddedToken> tokens_;
  Matcher raw_, normalized_;
};

}  // namespace dsa::tok
