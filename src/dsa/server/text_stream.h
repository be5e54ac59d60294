// Text of a generation as it streams: incremental detokenization and stop strings.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "dsa/server/openai_protocol.h"
#include "dsa/tokenizer/incremental_text.h"

namespace dsa::server {

// Incremental detokenization: dsa::IncrementalText (tokenizer/incremental_text.h).
using ::dsa::IncrementalText;

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
