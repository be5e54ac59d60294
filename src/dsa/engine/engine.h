// Engine: continuous batching over a model::CausalLM. Single-threaded: the caller (a loop, or the
// server's engine thread) calls step() while has_unfinished().
//
// One step builds one ragged forward batch (every request's tokens contiguous, causal_lm.h):
//   1. every running request that decodes gives its one next token;
//   2. running requests still prefilling give their next prompt chunk (at most
//      max_prefill_chunk tokens each, 0 = no cap), in arrival order, while the step has room;
//   3. waiting requests are admitted in arrival order (a model request is created for each)
//      while fewer than max_running run and the step has room, and give their first chunk.
// A step holds at most max_step_tokens tokens. A request whose computed tokens reach the end of
// its tokens gets a new token sampled from its logits row (sampler.h); it finishes with "stop"
// when that token is one of its stop ids (or an eos id unless ignore_eos), with "length" at
// max_tokens (or the model's context length); its model state (KV pages) is freed at once.
//
// KV memory: the engine cannot see the model's page pools, so it learns of exhaustion from the
// forward: KvManager::prepare throws KvOutOfMemory before changing anything. Then the most
// recently admitted running request is preempted (its state freed, it goes back to the front of
// the waiting queue and is recomputed later; its RNG state is kept, so its tokens do not change),
// admissions stop until a request finishes, and the step is rebuilt. A request that does not fit
// even when it runs alone finishes with "error" (the cache is too small for it).
// Requests longer than the model's context (prompt + max_tokens > max_model_len) are refused by
// add_request.
#pragma once
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "dsa/engine/sampling_params.h"
#include "dsa/engine/sequence.h"
#include "dsa/model/causal_lm.h"

namespace dsa::engine {

struct EngineOptions {
  int max_running = 16;            // requests holding model state at once (DeepSeek-V4's KV manager: <= 16)
  int64_t max_step_tokens = 512;   // tokens of one forward (>= max_running so every running request advances)
  int64_t max_prefill_chunk = 0;   // prompt tokens of one request in one step; 0: up to max_step_tokens
  int64_t max_model_len = 0;       // prompt + max_tokens bound; 0: the model's max_position_embeddings
  std::vector<int32_t> eos_token_ids;  // stop every request unless it sets ignore_eos

  void validate() const;  // throws dsa::Error naming the field and value
};

// What one step did for one request.
struct StepOutput {
  uint64_t id = 0;
  std::vector<int32_t> new_tokens;  // 0 or 1 tokens
  FinishReason finish = FinishReason::None;
  std::string error;                // why, for FinishReason::Error
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;    // generated so far
  bool finished() const { return finish != FinishReason::None; }
};

// Result of generate(): a finished request.
struct Completion {
  std::vector<int32_t> tokens;  // generated
  FinishReason finish = FinishReason::None;
  std::string error;
};

class Engine {
 public:
  Engine(model::CausalLM& lm, EngineOptions options = {});
  ~Engine();  // frees the model state of requests still running
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Checks a request without queueing it (reads only the immutable model config, so any thread
  // may call it): non-empty prompt, ids in the vocabulary, params valid, prompt + max_tokens <=
  // max_model_len. Throws dsa::Error saying what is wrong.
  void check_request(const std::vector<int32_t>& prompt, const SamplingParams& params) const;
  // Queues a request (check_request first) and returns its id.
  uint64_t add_request(std::vector<int32_t> prompt, const SamplingParams& params);
  // Finishes a request now with "abort" (the next step() reports it); unknown ids are ignored.
  void abort(uint64_t id);

  bool has_unfinished() const { return !waiting_.empty() || !running_.empty() || !pending_.empty(); }
  size_t num_waiting() const { return waiting_.size(); }
  size_t num_running() const { return running_.size(); }
  int64_t num_preemptions() const { return preemptions_; }
  int64_t max_model_len() const { return max_model_len_; }
  const model::ModelConfig& config() const { return lm_.config(); }
  const EngineOptions& options() const { return opt_; }

  // Runs one forward (when anything can run) and returns what changed, finished requests
  // included (aborted ones too). Exceptions other than KV exhaustion propagate.
  std::vector<StepOutput> step();

  // Convenience for tests and batch use: queues every prompt, steps until all finished, and
  // returns the completions in prompt order.
  std::vector<Completion> generate(const std::vector<std::vector<int32_t>>& prompts,
                                   const std::vector<SamplingParams>& params);

 private:
  struct Slot {
    Sequence* seq;
    int64_t count;
  };
  std::vector<Slot> schedule();
  void preempt_last();
  void finish(Sequence& s, FinishReason r, std::vector<StepOutput>& out, std::string error = {});
  StepOutput report(const Sequence& s) const;

  model::CausalLM& lm_;
  EngineOptions opt_;
  int64_t max_model_len_ = 0;
  uint64_t next_id_ = 0;
  std::map<uint64_t, std::unique_ptr<Sequence>> seqs_;  // every unfinished request
  std::deque<Sequence*> waiting_;                       // arrival order (preempted ones in front)
  std::vector<Sequence*> running_;                      // admission order
  std::vector<StepOutput> pending_;                     // finished outside step() (aborts)
  bool admission_blocked_ = false;                      // after a preemption, until a request finishes
  int64_t preemptions_ = 0;
};

}  // namespace dsa::engine
