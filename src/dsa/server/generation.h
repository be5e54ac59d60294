// Generation: the sequences of one HTTP request (prompts x choices) as they generate. They are
// submitted to the EngineLoop together; each gets its text pipeline (incremental detokenization,
// stop strings: a match finishes the sequence with "stop" and aborts its engine request) and its
// logprobs. The completion route uses it for both streamed and whole responses; other routes
// (chat) can too.
#pragma once
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "dsa/server/engine_loop.h"
#include "dsa/server/text_stream.h"

namespace dsa::server {

struct TextOptions {
  std::vector<std::string> stop;     // stop strings (need a decoder)
  bool include_stop_str_in_output = false;
  bool skip_special_tokens = true;
};

// What one poll brought for one sequence.
struct SequenceDelta {
  size_t index = 0;
  std::string text;              // text that may be emitted now (held-back stop prefixes excluded)
  std::vector<int32_t> tokens;   // new tokens (up to the one that completed a stop string)
  std::vector<engine::TokenLogprob> logprobs, prompt_logprobs;
  std::string finish_reason;     // "" while running; "stop", "length", "abort" or "error"
  std::string error;             // why, for "abort" and "error"
  int64_t prompt_tokens = 0, completion_tokens = 0;
};

class Generation {
 public:
  // Submits (throws QueueFull / ShuttingDown from EngineLoop::submit). `decode` may be empty
  // (no text; then `text.stop` must be empty).
  Generation(EngineLoop& loop, DecodeFn decode, std::vector<SequenceRequest> seqs, const TextOptions& text);
  ~Generation();  // aborts what has not finished
  Generation(const Generation&) = delete;
  Generation& operator=(const Generation&) = delete;

  // Waits up to `timeout` for news; one delta per event that came.
  std::vector<SequenceDelta> poll(std::chrono::milliseconds timeout);
  bool finished() const;  // every sequence has finished
  void abort();           // finishes every unfinished sequence (its next delta says "abort")
  size_t size() const { return seqs_.size(); }

 private:
  struct Seq {
    std::unique_ptr<IncrementalText> text;
    StopStrings stop;
    int64_t min_tokens = 0;
    int64_t generated = 0;
    bool done = false;
  };
  EngineLoop& loop_;
  bool have_text_;
  std::shared_ptr<RequestStream> stream_;
  std::vector<Seq> seqs_;
  size_t left_;
};

}  // namespace dsa::server
