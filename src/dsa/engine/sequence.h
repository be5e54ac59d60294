// Sequence: the engine's record of one request: its tokens (prompt, then the generated ones), how
// many of them the KV cache holds, whether it is running (registered with the KV manager under
// its id), its sampling rules and seed. The tokens still to compute are tokens[computed..): a
// prompt (in chunks) while prefilling, the last generated token while decoding, everything
// again after a preemption (the pages were freed; they are rebuilt by recomputation).
#pragma once
#include <cstdint>
#include <vector>


#include "dsa/engine/sampler.h"
#include "dsa/engine/sampling_params.h"
#include "dsa/kv/request_id.h"

namespace dsa::engine {

enum class FinishReason { None, Length, Stop, Abort, Error };
// OpenAI spelling: "length", "stop", "abort", "error" ("" for None).
const char* finish_reason_name(FinishReason r);

struct Sequence {
  kv::RequestId id = 0;
  std::vector<int32_t> tokens;  // prompt ++ generated
  int64_t prompt_len = 0;
  int64_t computed = 0;         // tokens the KV cache holds
  bool running = false;         // registered with the KV manager (id = this id)
  SamplingParams params;
  uint64_t seed = 0;            // params.seed, or drawn at add_request
  // params.prompt_logprobs >= 0: the logprob of prompt token i + 1 given tokens [0, i], filled
  // as the prefill chunks run (kept across a preemption: the recomputation does not redo it);
  // reported with the first new token.
  std::vector<TokenLogprob> prompt_logprobs;
  bool prompt_logprobs_reported = false;
  // Speculative decoding (docs/speculative-decoding.md): the MTP layer's proposals for the
  // tokens after tokens.back(), verified with it in the next step; and how far the MTP layer's
  // own cache holds entries (positions [0, mtp_done)).
  int speculative_tokens = 0;   // drafts per step for this request (0: none)
  std::vector<int32_t> drafts;
  // Sampled under --speculative-acceptance rejection: drafts are draws from the MTP layer's
  // processed distribution, draft_q[k] (f32 [vocab], the probabilities drafts[k] was drawn
  // from), and are verified by the rejection rule (engine/rejection_sampling.h).
  bool rejection = false;
  std::vector<std::vector<float>> draft_q;
  int64_t mtp_done = 0;

  int64_t generated() const { return static_cast<int64_t>(tokens.size()) - prompt_len; }
  int64_t remaining() const { return static_cast<int64_t>(tokens.size()) - computed; }
  bool wants_prompt_logprobs() const {
    return params.prompt_logprobs >= 0 && static_cast<int64_t>(prompt_logprobs.size()) < prompt_len - 1;
  }
};

}  // namespace dsa::engine
