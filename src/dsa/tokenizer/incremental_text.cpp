#include "dsa/tokenizer/incremental_text.h"

#include <algorithm>

namespace dsa {

std::string IncrementalText::add(const std::vector<int32_t>& tokens, bool last) {
  tail_.insert(tail_.end(), tokens.begin(), tokens.end());
  if (tail_.empty()) return {};
  const std::string full = decode_(tail_);
  static const std::string kReplacement = "\xEF\xBF\xBD";  // U+FFFD in UTF-8
  size_t end = full.size();
  const bool partial = !last && end >= 3 && full.compare(end - 3, 3, kReplacement) == 0;
  if (partial) end -= 3;
  std::string out = end > sent_ ? full.substr(sent_, end - sent_) : std::string();
  if (partial) {
    sent_ = std::max(sent_, end);
  } else {  // the text is whole: later tokens decode on their own
    tail_.clear();
    sent_ = 0;
  }
  return out;
}

}  // namespace dsa
