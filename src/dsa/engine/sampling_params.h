// SamplingParams: how the engine picks each new token of one request and when it stops
// (OpenAI / vLLM completion fields). The sampler (sampler.h) applies them to the request's f32
// logits row in this order:
//   1. logit_bias: bias[id] is added to logit[id];
//   2. min_tokens: while fewer than min_tokens tokens were generated, the stop ids and (unless
//      ignore_eos) the eos ids get -inf, so the request cannot stop early;
//   3. repetition_penalty r (CTRL / Hugging Face): every id in the prompt or the output so far
//      has its logit divided by r when positive, multiplied by r otherwise;
//   4. frequency / presence penalties (OpenAI): logit[id] -= frequency_penalty * count +
//      presence_penalty * (count > 0), count = occurrences of id in the output so far;
//   5. temperature 0 is greedy (argmax, lowest id on ties). Otherwise softmax(logits /
//      temperature) restricted to the top_k highest logits (0 = all), then to the tokens whose
//      probability is at least min_p times the largest one, then to the smallest set of most
//      probable tokens whose probability reaches top_p (1 = all), drawn with the request's own
//      seed (unset: a random seed; ops/sampling/sampling.h draws per position), so the same
//      seed gives the same tokens whatever else runs in the batch.
// Steps 1-5 run on the device for the common rules (temperature, top_k, top_p); a request that
// uses steps 1-4 or min_p has its logits row brought to the host and sampled there by the same
// rules (the reference of the device sampler).
// logprobs / prompt_logprobs ask for log-softmax values of the raw logits (before 1-5, as vLLM
// reports them by default): the sampled token's and the top `logprobs` alternatives.
#pragma once
#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

namespace dsa::engine {

struct SamplingParams {
  int64_t max_tokens = 16;              // new tokens at most (>= 1)
  double temperature = 0.0;             // 0: greedy
  int64_t top_k = 0;                    // 0 (or >= vocab): no top-k cut
  double top_p = 1.0;                   // (0, 1]
  double min_p = 0.0;                   // [0, 1]; 0: off
  double presence_penalty = 0.0;        // [-2, 2]
  double frequency_penalty = 0.0;       // [-2, 2]
  double repetition_penalty = 1.0;      // (0, inf); 1: off
  std::vector<std::pair<int32_t, float>> logit_bias;  // (id, bias in [-100, 100])
  int64_t min_tokens = 0;               // [0, max_tokens]
  std::optional<uint64_t> seed;
  std::vector<int32_t> stop_token_ids;  // generating one of these finishes with "stop" (the token is kept)
  bool ignore_eos = false;              // the engine's eos ids do not stop this request
  int logprobs = -1;                    // -1: none; k >= 0: each new token's logprob and the top k
  int prompt_logprobs = -1;             // -1: none; k >= 0: each prompt token's (from the second) and the top k
  // Drafts per step (docs/speculative-decoding.md): -1 = the engine's --speculative-tokens, 0 =
  // none, k > 0 = at most k (never more than the engine's). Requests that need their logits on the
  // host (penalties, logit_bias, min_tokens, logprobs, prompt_logprobs) decode without.
  int speculative_tokens = -1;

  static constexpr int kMaxLogprobs = 20;

  // Throws dsa::Error naming the field and value; `vocab` bounds the ids.
  void validate(int64_t vocab) const;
  // True when the row must be changed before sampling (steps 1-4 above).
  bool processes_logits() const;
};

}  // namespace dsa::engine
