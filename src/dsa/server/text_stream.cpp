#include "dsa/server/text_stream.h"

#include <algorithm>

namespace dsa::server {

StopStrings::Result StopStrings::add(const std::string& piece, bool last) {
  Result r;
  if (matched_) return r;
  std::string buf = held_ + piece;
  held_.clear();
  size_t best = std::string::npos, best_len = 0;
  for (const std::string& s : stops_) {
    const size_t at = buf.find(s);
    if (at != std::string::npos && (at < best || (at == best && s.size() > best_len))) {
      best = at;
      best_len = s.size();
    }
  }
  if (best != std::string::npos) {
    matched_ = r.matched = true;
    r.text = buf.substr(0, best + (include_ ? best_len : 0));
    return r;
  }
  size_t keep = 0;  // the longest end of buf that starts some stop string
  if (!last)
    for (const std::string& s : stops_)
      for (size_t k = std::min(s.size() - 1, buf.size()); k > keep; --k)
        if (buf.compare(buf.size() - k, k, s, 0, k) == 0) {
          keep = k;
          break;
        }
  r.text = buf.substr(0, buf.size() - keep);
  held_ = buf.substr(buf.size() - keep);
  return r;
}

}  // namespace dsa::server
