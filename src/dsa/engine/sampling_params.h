// SamplingParams: how the engine picks each new token of one request and when it stops
// (OpenAI completion fields: max_tokens, temperature, top_k, top_p, seed, stop_token_ids,
// ignore_eos). temperature 0 is greedy (argmax, lowest id on ties); otherwise softmax(logits /
// temperature) restricted to the top_k highest logits (0 = all) and then to the smallest set of
// most probable tokens whose probability reaches top_p (1 = all), drawn with the request's own
// seed (unset: a random seed; ops/sampling/sampling.h draws per position), so the same seed
// reproduces the same tokens whatever else runs in the batch.
#pragma once
#include <cstdint>
#include <optional>
#include <vector>

namespace dsa::engine {

struct SamplingParams {
  int64_t max_tokens = 16;              // new tokens at most (>= 1)
  double temperature = 0.0;             // 0: greedy
  int64_t top_k = 0;                    // 0 (or >= vocab): no top-k cut
  double top_p = 1.0;                   // (0, 1]
  std::optional<uint64_t> seed;
  std::vector<int32_t> stop_token_ids;  // generating one of these finishes with "stop" (the token is kept)
  bool ignore_eos = false;              // the engine's eos ids do not stop this request

  // Throws dsa::Error naming the field and value; `vocab` bounds the stop ids.
  void validate(int64_t vocab) const;
};

}  // namespace dsa::engine
