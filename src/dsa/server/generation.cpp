#include "dsa/server/generation.h"

#include "dsa/core/error.h"

namespace dsa::server {

Generation::Generation(EngineLoop& loop, DecodeFn decode, std::vector<SequenceRequest> seqs, const TextOptions& text)
    : loop_(loop), have_text_(static_cast<bool>(decode)), left_(seqs.size()) {
  DSA_CHECK(have_text_ || text.stop.empty(), "server: stop strings without a decoder");
  const bool skip = text.skip_special_tokens;
  for (const SequenceRequest& s : seqs) {
    auto decode_seq = [decode, skip](const std::vector<int32_t>& ids) { return decode(ids, skip); };
    Seq q{have_text_ ? std::make_unique<IncrementalText>(decode_seq) : nullptr,
          StopStrings(text.stop, text.include_stop_str_in_output), s.params.min_tokens};
    seqs_.push_back(std::move(q));
  }
  stream_ = loop_.submit(std::move(seqs));
}

Generation::~Generation() {
  if (!finished()) loop_.abort(stream_);
}

bool Generation::finished() const { return left_ == 0; }

void Generation::abort() {
  if (!finished()) loop_.abort(stream_);
}

std::vector<SequenceDelta> Generation::poll(std::chrono::milliseconds timeout) {
  std::vector<SequenceDelta> out;
  for (StreamEvent& e : stream_->wait(timeout)) {
    Seq& s = seqs_.at(e.index);
    if (s.done) continue;  // e.g. the abort that follows a stop-string match
    SequenceDelta d;
    d.index = e.index;
    d.prompt_tokens = e.prompt_tokens;
    const bool fin = e.finish != engine::FinishReason::None;
    s.generated += static_cast<int64_t>(e.tokens.size());
    d.completion_tokens = s.generated;
    if (have_text_) {
      std::string piece = s.text->add(e.tokens, fin);
      if (!s.stop.empty() && s.generated > s.min_tokens) {
        // Stop strings count from min_tokens on: text of the first min_tokens tokens passes.
        StopStrings::Result r = s.stop.add(piece, fin);
        piece = std::move(r.text);
        if (r.matched) {
          s.done = true;
          d.finish_reason = "stop";
          loop_.abort(stream_, e.index);
        }
      }
      d.text = std::move(piece);
    }
    d.tokens = std::move(e.tokens);
    d.logprobs = std::move(e.logprobs);
    d.prompt_logprobs = std::move(e.prompt_logprobs);
    if (fin && !s.done) {
      s.done = true;
      d.finish_reason = engine::finish_reason_name(e.finish);
      d.error = e.error;
      d.completion_tokens = e.completion_tokens;
    }
    if (s.done) --left_;
    out.push_back(std::move(d));
  }
  return out;
}

}  // namespace dsa::server
