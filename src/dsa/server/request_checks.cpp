#include "dsa/server/request_checks.h"

#include <algorithm>
#include <cstring>

#include "dsa/core/error.h"

namespace dsa::server {
namespace {

// The largest n in [lo, hi] with fits(n), or lo - 1 (fits is monotone).
template <typename F>
int64_t largest_fitting(int64_t lo, int64_t hi, F fits) {
  int64_t best = lo - 1;
  while (lo <= hi) {
    const int64_t mid = lo + (hi - lo) / 2;
    if (fits(mid)) {
      best = mid;
      lo = mid + 1;
    } else {
      hi = mid - 1;
    }
  }
  return best;
}

// Engine::check_request's messages start with the field they are about, or with the prompt.
BadRequest engine_refusal(const std::string& msg, const std::string& prompt_field) {
  std::string param = prompt_field;
  for (const char* f : {"max_tokens", "temperature", "top_k", "top_p", "min_p", "presence_penalty",
                        "frequency_penalty", "repetition_penalty", "logit_bias", "min_tokens", "stop_token_ids",
                        "logprobs", "prompt_logprobs"})
    if (msg.rfind(f, 0) == 0 && (msg.size() == std::strlen(f) || msg[std::strlen(f)] == ' ' || msg[std::strlen(f)] == ':'))
      param = f;
  if (param == "prompt_logprobs") param = "logprobs";
  return BadRequest(msg, param);
}

}  // namespace

int64_t max_request_tokens(const engine::Engine& eng) {
  const int64_t kv_max = largest_fitting(1, eng.max_model_len(), [&](int64_t n) { return eng.can_ever_fit(n); });
  return std::min(eng.max_model_len(), kv_max);
}

void settle_and_check(const engine::Engine& eng, int64_t request_max, const std::vector<int32_t>& prompt,
                      std::optional<int64_t> max_tokens, engine::SamplingParams& sp, const std::string& prompt_field) {
  const int64_t len = static_cast<int64_t>(prompt.size());
  if (max_tokens) {
    sp.max_tokens = std::max<int64_t>(*max_tokens, 1);
  } else {
    const int64_t room = request_max - len;
    if (room < 1)
      throw BadRequest(prompt_field + " (" + std::to_string(len) + " tokens) leaves no room for a new token (context " +
                           std::to_string(eng.max_model_len()) + ", KV cache " + std::to_string(request_max) +
                           " tokens)",
                       prompt_field);
    sp.max_tokens = room;
  }
  if (!eng.can_ever_fit(len + sp.max_tokens))
    throw BadRequest(prompt_field + " (" + std::to_string(len) + " tokens) + max_tokens (" +
                         std::to_string(sp.max_tokens) + ") needs more KV cache than this server has: one request holds at most " +
                         std::to_string(request_max) + " tokens",
                     len >= request_max ? prompt_field : "max_tokens");
  try {
    eng.check_request(prompt, sp);
  } catch (const Error& e) {
    throw engine_refusal(e.what(), prompt_field);
  }
}

}  // namespace dsa::server
