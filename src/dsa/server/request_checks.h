// The checks a generation request passes before anything is queued, shared by the completion
// and chat routes: max_tokens settled (absent: as many as the context and the KV cache allow)
// and the sequence checked against the engine (the vocabulary, the context, whether the KV
// cache can ever hold prompt + max_tokens). Each refusal is a BadRequest naming the field.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "dsa/engine/engine.h"
#include "dsa/server/openai_protocol.h"

namespace dsa::server {

// The most tokens (prompt + output) one request can hold in this engine's KV cache and context.
int64_t max_request_tokens(const engine::Engine& eng);

// Sets sp.max_tokens from `max_tokens` (0 is taken as 1: echo scoring) or, absent, the room left
// by the prompt, and checks the sequence (Engine::can_ever_fit, Engine::check_request).
// `request_max`: max_request_tokens(eng); `prompt_field`: the field a prompt refusal names.
void settle_and_check(const engine::Engine& eng, int64_t request_max, const std::vector<int32_t>& prompt,
                      std::optional<int64_t> max_tokens, engine::SamplingParams& sp, const std::string& prompt_field);

}  // namespace dsa::server
