// IncrementalText: the text of a token stream, chunk by chunk, for streamed replies (the server's
// completions and chat streams, `dsa chat`).
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace dsa {

// Decodes tokens chunk by chunk and returns the text each chunk adds. A trailing U+FFFD (the
// first bytes of a character whose other bytes come with later tokens) is held back until more
// tokens or the last chunk come. Only the tokens since the text was last whole are decoded
// again, so a long generation costs linear time; this assumes that the decoding of a sequence
// split where the text is whole is the concatenation of the decodings (true of byte-level BPE,
// the decoder of the supported tokenizers, also when special tokens are dropped).
class IncrementalText {
 public:
  using DecodeFn = std::function<std::string(const std::vector<int32_t>&)>;
  explicit IncrementalText(DecodeFn decode) : decode_(std::move(decode)) {}
  std::string add(const std::vector<int32_t>& tokens, bool last);

 private:
  DecodeFn decode_;
  std::vector<int32_t> tail_;  // tokens since the text was last whole
  size_t sent_ = 0;            // bytes of decode(tail_) already returned
};

}  // namespace dsa
