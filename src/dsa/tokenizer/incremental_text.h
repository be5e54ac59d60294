// IncrementalText: the text of a token stream, chunk by chunk, for streamed replies (the server's
// SSE chunks, `dsa chat`).
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace dsa {

// Text of a stream chunk by chunk: decodes all tokens so far and returns what extends the text
// already returned, holding back a trailing U+FFFD (a multi-byte character whose bytes are split
// across tokens) until more tokens or the last chunk come. Assumes the decoding of a longer
// sequence extends that of a shorter one. Quadratic in the output length (one decode of
// everything per chunk); fine for the lengths served now.
class IncrementalText {
 public:
  using DecodeFn = std::function<std::string(const std::vector<int32_t>&)>;
  explicit IncrementalText(DecodeFn decode) : decode_(std::move(decode)) {}
  std::string add(const std::vector<int32_t>& tokens, bool last);

 private:
  DecodeFn decode_;
  std::vector<int32_t> tokens_;
  size_t sent_ = 0;
};

}  // namespace dsa
