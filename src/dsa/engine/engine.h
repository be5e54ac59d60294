// Engine: continuous batching over a model::CausalLM. Single-threaded: the caller (a loop, or the
// server's engine thread) calls step() while has_unfinished().
//
// Memory: the engine owns the model's KV memory. At construction it sizes one kv::KvManager from
// the model's declared requirements and the memory options (kv_sizing.h), logs the capacity in
// tokens and in concurrent requests at max_model_len, and refuses to start when one request of
// max_model_len cannot fit. A ModelRunner (model_runner.h) runs each step.
//
// One step builds one ragged batch (every request's tokens contiguous):
//   1. every running request that decodes gives its one next token; when the cache cannot hold
//      them all, the most recently admitted running requests are preempted (their pages freed
//      exactly, they return to the front of the waiting queue and are recomputed later with the
//      same seed, so their tokens do not change) and admissions pause until a request finishes;
//   2. running requests still prefilling give their next prompt chunk (at most
//      max_prefill_chunk tokens each, 0 = no cap), in arrival order, while the step has room;
//   3. waiting requests are admitted in arrival order while fewer than max_running run, the step
//      has room and the KV manager says their first chunk fits (a capacity query, never a caught
//      exception), and give their first chunk.
// A step holds at most max_step_tokens tokens. A request whose computed tokens reach the end of
// its tokens gets a new token sampled on the device (ops/sampling); it finishes with "stop" when
// that token is one of its stop ids (or an eos id unless ignore_eos), with "length" at max_tokens
// (or max_model_len), with "error" when its logits are not finite; its pages are freed at once.
// Requests that need more than the device sampler (penalties, logit_bias, min_tokens, min_p:
// their processed row is sampled on the host; logprobs: log-softmax of the raw row) get their
// logits row back from the runner; a request that asked for prompt logprobs gets the rows of
// every prompt token of its chunks.
// Requests that can never fit (prompt + max_tokens beyond max_model_len or beyond what the whole
// cache holds) are refused by check_request / add_request.
#pragma once
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "dsa/engine/kv_sizing.h"
#include "dsa/engine/model_runner.h"
#include "dsa/engine/sampler.h"
#include "dsa/engine/sampling_params.h"
#include "dsa/engine/sequence.h"
#include "dsa/engine/speculative.h"
#include "dsa/kv/kv_manager.h"
#include "dsa/model/causal_lm.h"

namespace dsa::engine {

struct EngineOptions {
  int max_running = 16;            // requests holding KV memory at once (--max-num-seqs)
  int64_t max_step_tokens = 512;   // tokens of one forward (--max-num-batched-tokens; >= max_running)
  int64_t max_prefill_chunk = 0;   // prompt tokens of one request in one step; 0: up to max_step_tokens
  int64_t max_model_len = 0;       // prompt + max_tokens bound; 0: the model's max_position_embeddings
  KvMemoryOptions memory;          // KV budget (--gpu-memory-utilization / --kv-cache-memory)
  int64_t kv_blocks = 0;           // > 0: exactly this many pages per unbounded cache group (tests)
  std::vector<int32_t> eos_token_ids;  // stop every request unless it sets ignore_eos
  bool log_capacity = true;        // one start-up log line with the KV capacity
  bool cuda_graphs = true;         // CUDA: replay repeated step shapes as graphs (false: --enforce-eager)
  int64_t graph_max_tokens = 512;  // steps with more tokens always run eagerly (prefill)
  // Decode-only steps of up to this many requests are padded to a batch bucket (1, 2, 4, ...,
  // capped here: ModelRunner::set_decode_padding), so one graph serves every batch size of its
  // bucket, and capture_decode_graphs() captures the buckets at start-up (--max-graph-batch).
  // 0: max_running; -1: no padding (a graph per exact batch size, captured lazily). Never above
  // max_running or graph_max_tokens.
  int64_t graph_max_batch = 0;
  // When decode steps are padded: with CUDA graphs (the default; padding only serves graphs), or
  // always / never whatever the device (tests: the CPU equality of padded steps, eager padded runs).
  enum class DecodePadding { WithGraphs, Always, Never } decode_padding = DecodePadding::WithGraphs;
  // Speculative decoding with the model's MTP layer (--speculative-tokens, vLLM's
  // num_speculative_tokens; docs/speculative-decoding.md): the drafts per decode step; 0 = off.
  int speculative_tokens = 0;
  // How sampled requests verify drafts (--speculative-acceptance, speculative.h): the rejection
  // rule (default: the target's distribution, higher acceptance) or exact match (the same tokens
  // as decoding without drafts for a seeded request). Greedy requests: argmax match either way.
  SpecAcceptance speculative_acceptance = SpecAcceptance::Rejection;
  // Tests: called with every request's fresh drafts (may change them, not lengthen them), so a
  // test can force drafts that are all accepted or all rejected.
  std::function<void(const Sequence&, std::vector<int32_t>& drafts)> draft_hook;
  // BENCHMARK ONLY (`dsa bench decode --speculative-tokens`): every verified draft is accepted
  // whatever the target picked, so each step emits the drafts and the target's bonus token and
  // the output is NOT the model's. It fixes the steady-state round shape (N + 1 tokens verified
  // per request, N MTP steps) on random weights, which accept nearly nothing. No flag of `dsa
  // serve` / `dsa generate` sets it.
  bool benchmark_accept_all_drafts = false;

  void validate() const;  // throws dsa::Error naming the field and value
};

// What one step did for one request.
struct StepOutput {
  kv::RequestId id = 0;
  std::vector<int32_t> new_tokens;  // 0 or 1 tokens; up to speculative_tokens + 1 when drafts are verified
  std::vector<TokenLogprob> logprobs;         // params.logprobs >= 0: one per new token (raw logits)
  std::vector<TokenLogprob> prompt_logprobs;  // params.prompt_logprobs >= 0: prompt tokens 1.., once,
                                              // with the first new token
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

class TensorParallelModels;
class TpRanks;

class Engine {
 public:
  Engine(model::CausalLM& lm, EngineOptions options = {});
  // Tensor parallelism (docs/parallelism.md, tp_ranks.h): this engine schedules, rank 0 samples,
  // every rank of `tp` runs each step on its shard with KV pools of its own (each rank's budget
  // from its own device). CUDA graphs are off; speculative decoding runs over in-process ranks
  // (not across processes: refused). `tp` must outlive the engine.
  Engine(TensorParallelModels& tp, EngineOptions options = {});
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Checks a request without queueing it (reads only immutable state, so any thread may call it):
  // non-empty prompt, ids in the vocabulary, params valid, prompt + max_tokens <= max_model_len
  // and within what the whole KV cache can hold. Throws dsa::Error saying what is wrong.
  void check_request(const std::vector<int32_t>& prompt, const SamplingParams& params) const;
  // Whether a request holding `tokens` tokens of context (prompt + max_tokens) can ever run:
  // within max_model_len and the whole KV cache. Fixed capacity only, so any thread may ask (a
  // server refuses what can never fit before queueing it).
  bool can_ever_fit(int64_t tokens) const { return tokens <= max_model_len_ && kv_->fits_alone(tokens); }
  // Queues a request (check_request first) and returns its id.
  kv::RequestId add_request(std::vector<int32_t> prompt, const SamplingParams& params);
  // Finishes a request now with "abort" (the next step() reports it); unknown ids are ignored.
  void abort(kv::RequestId id);

  bool has_unfinished() const { return !waiting_.empty() || !running_.empty() || !pending_.empty(); }
  size_t num_waiting() const { return waiting_.size(); }
  size_t num_running() const { return running_.size(); }
  // True while the request holds KV memory (admitted and not preempted); false when unknown.
  bool is_running(kv::RequestId id) const {
    auto it = seqs_.find(id);
    return it != seqs_.end() && it->second->running;
  }
  int64_t num_preemptions() const { return preemptions_; }
  const SpecStats& spec_stats() const { return spec_; }  // speculative decoding counters
  int64_t max_model_len() const { return max_model_len_; }
  const model::ModelConfig& config() const { return lm_.config(); }
  const EngineOptions& options() const { return opt_; }
  const kv::KvManager& kv() const { return *kv_; }
  ModelRunner& runner() { return *runner_; }  // profiling (dsa bench decode), graph statistics
  int tensor_parallel_size() const;
  TpRanks* tensor_parallel() { return tp_.get(); }  // null without tensor parallelism
  // Start-up capture of the padded decode buckets (ModelRunner::capture_decode_graphs): CUDA with
  // graphs and padding on; call after the tuner (dsa serve does). Empty otherwise.
  GraphCaptureReport capture_decode_graphs() { return runner_->capture_decode_graphs(); }
  std::vector<kv::KvUsage> kv_usage() const { return kv_->usage(); }
  // Context tokens the KV cache holds, and how many requests of max_model_len fit at once.
  int64_t capacity_tokens() const { return kv_->capacity_tokens(); }
  int64_t capacity_requests() const;

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
  Engine(model::CausalLM& lm, TensorParallelModels* tp, EngineOptions options);
  std::vector<Slot> schedule();
  void preempt(Sequence* s);
  void finish(Sequence& s, FinishReason r, std::vector<StepOutput>& out, std::string error = {});
  StepOutput report(const Sequence& s) const;

  model::CausalLM& lm_;
  EngineOptions opt_;
  int64_t max_model_len_ = 0;
  std::unique_ptr<kv::KvManager> kv_;
  std::unique_ptr<ModelRunner> runner_;
  kv::RequestId next_id_ = 0;
  std::map<kv::RequestId, std::unique_ptr<Sequence>> seqs_;  // every unfinished request
  std::deque<Sequence*> waiting_;                       // arrival order (preempted ones in front)
  std::vector<Sequence*> running_;                      // admission order
  std::vector<StepOutput> pending_;                     // finished outside step() (aborts)
  bool admission_blocked_ = false;                      // after a preemption, until a request finishes
  int64_t preemptions_ = 0;
  std::unique_ptr<Drafter> drafter_;                    // speculative_tokens > 0
  std::unique_ptr<TpRanks> tp_;                         // tensor parallelism: the ranks' runners
  SpecStats spec_;
};

}  // namespace dsa::engine
