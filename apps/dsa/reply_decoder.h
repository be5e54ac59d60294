// The decoder of chat replies (`dsa serve`, `dsa chat`): special tokens are dropped except those
// the reply syntax is parsed by (chat::reply_markers: <think>, tool-call tags, end of turn), so a
// model's stray special tokens do not show in the reply while the parser still sees its
// delimiters.
#pragma once
#include <algorithm>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "dsa/chat/output_parser.h"
#include "dsa/tokenizer/tokenizer.h"

namespace dsa::cli {

inline std::function<std::string(const std::vector<int32_t>&)> reply_decoder(std::shared_ptr<const Tokenizer> tok,
                                                                             chat::OutputSyntax syntax) {
  auto keep = std::make_shared<std::vector<int32_t>>();  // special ids to keep, sorted
  for (const std::string& m : chat::reply_markers(syntax))
    if (const int32_t id = tok->token_id(m); id >= 0) keep->push_back(id);
  std::sort(keep->begin(), keep->end());
  return [tok, keep](const std::vector<int32_t>& ids) {
    std::vector<int32_t> kept;
    kept.reserve(ids.size());
    for (int32_t id : ids)
      if (!tok->is_special(id) || std::binary_search(keep->begin(), keep->end(), id)) kept.push_back(id);
    return tok->decode(kept, /*skip_special_tokens=*/false);
  };
}

}  // namespace dsa::cli
