// Text of a generation as it streams: incremental detokenization and stop strings.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "dsa/server/openai_protocol.h"

namespace dsa::server {

// Decodes tokens chunk by chunk and returns the text each chunk adds. A trailing U+FFFD (the
// first bytes of a character whose other bytes come with later tokens) is held back until more
// tokens or the last chunk come. Only the tokens since the text was last whole are decoded
// again, so a long generation costs linear time; this assumes that the decoding of a sequence
// split where the text is whole is the concatenation of the decodings (true of byte-level BPE,
// the decoder of the supported tokenizers).
class IncrementalText {
 public:
  IncrementalText(DecodeFn decode, bool skip_special_tokens = true)
      : decode_(std::move(decode)), skip_special_(skip_special_tokens) {}
  std::string add(const std::vector<int32_t>& tokens, bool last);

 private:
  DecodeFn decode_;
  bool skip_special_;
  std::vector<int32_t> tail_;  // tokens since the text was last whole
  size_t sent_ = 0;            // bytes of decode(tail_) already returned
};

// Stop strings over a text that arrives in pieces: the text ends before the earliest occurrence
// of any of them (or after it, with include_in_output). Text that may still turn out to be the
// start of a stop string is held back until a later piece decides.
class StopStrings {
 public:
  StopStrings(std::vector<std::string> stops, bool include_in_output)
      : stops_(std::move(stops)), include_(include_in_output) {}
  struct Result {
    std::string text;  // what may be emitted now
    bool matched = false;
  };
  // `last`: no more text comes (what is held back is released).
  Result add(const std::string& piece, bool last);
  bool matched() const { return matched_; }
  bool empty() const { return stops_.empty(); }

 private:
  std::vector<std::string> stops_;
  bool include_;
  std::string held_;
  bool matched_ = false;
};

}  // namespace dsa::server
