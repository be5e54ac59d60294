#include "dsa/tokenizer/incremental_text.h"

namespace dsa {

std::string IncrementalText::add(const std::vector<int32_t>& tokens, bool last) {
  tokens_.insert(tokens_.end(), tokens.begin(), tokens.end());
  const std::string full = decode_(tokens_);
  static const std::string kReplacement = "\xEF\xBF\xBD";  // U+FFFD in UTF-8
  size_t end = full.size();
  if (!last && end >= 3 && full.compare(end - 3, 3, kReplacement) == 0) end -= 3;
  if (end <= sent_) return {};
  std::string out = full.substr(sent_, end - sent_);
  sent_ = end;
  return out;
}

}  // namespace dsa
