// Sequence: the engine's record of one request: its tokens (prompt, then the generated ones), how
// many of them the KV cache holds, whether it is running (registered with the KV manager under
// its id), its sampling rules and seed. The tokens still to compute are tokens[computed..): a
// prompt (in chunks) while prefilling, the last generated token while decoding, everything
// again after a preemption (the pages were freed; they are rebuilt by recomputation).
#pragma once
#include <cstdint>
#include <vector>

#include "dsa/engine/sampling_params.h"

namespace dsa::engine {

enum class FinishReason { None, Length, Stop, Abort, Error };
// OpenAI spelling: "length", "stop", "abort", "error" ("" for None).
const char* finish_reason_name(FinishReason r);

struct Sequence {
  uint64_t id = 0;
  std::vector<int32_t> tokens;  // prompt ++ generated
  int64_t prompt_len = 0;
  int64_t computed = 0;         // tokens the KV cache holds
  bool running = false;         // registered with the KV manager (id = this id)
  SamplingParams params;
  uint64_t seed = 0;            // params.seed, or drawn at add_request

  int64_t generated() const { return static_cast<int64_t>(tokens.size()) - prompt_len; }
  int64_t remaining() const { return static_cast<int64_t>(tokens.size()) - computed; }
};

}  // namespace dsa::engine
