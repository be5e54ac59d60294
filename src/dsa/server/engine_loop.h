// EngineLoop: runs an engine::Engine on its own thread for the HTTP handlers. A handler submits
// one or more sequences (the prompts x n of a request, already checked) and gets one
// RequestStream for all of them; the loop thread adds queued sequences and aborts between steps,
// runs step() while anything is unfinished, and pushes each step's new tokens (with logprobs
// when asked) and finishes into the streams, tagged with the sequence's index. The Engine
// itself is touched only by the loop thread.
//
// It also measures what /metrics reports per sequence: queue time (submitted -> first
// scheduled), time to first token, inter-token latency, end-to-end latency, and publishes the
// engine's counts and KV usage after every step.
#pragma once
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "dsa/engine/engine.h"
#include "dsa/server/metrics.h"

namespace dsa::server {

// What a stream receives for one of its sequences: tokens as they are made, then one finish.
struct StreamEvent {
  size_t index = 0;  // the sequence, in submission order
  std::vector<int32_t> tokens;
  std::vector<engine::TokenLogprob> logprobs;         // one per token when asked
  std::vector<engine::TokenLogprob> prompt_logprobs;  // once, with the first token, when asked
  engine::FinishReason finish = engine::FinishReason::None;
  std::string error;
  int64_t prompt_tokens = 0, completion_tokens = 0;
};

class RequestStream {
 public:
  explicit RequestStream(size_t sequences) : open_(sequences, true), left_(sequences) {}
  // Waits up to `timeout` for events; returns those that came (empty on timeout).
  std::vector<StreamEvent> wait(std::chrono::milliseconds timeout);
  void push(StreamEvent e);  // ignored for a sequence that has finished
  bool finished() const;     // every sequence has finished
  size_t size() const { return open_.size(); }

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<StreamEvent> events_;
  std::vector<bool> open_;
  size_t left_;
};

// Counters the loop thread publishes after every step (read by /metrics from any thread).
struct LoopStats {
  std::atomic<int64_t> running{0}, waiting{0}, preemptions{0}, steps{0};
  std::atomic<int64_t> graph_captures{0}, graph_replays{0};  // CUDA graphs of decode steps (engine/step_graphs.h)
  // Speculative decoding (engine/speculative.h SpecStats)
  std::atomic<int64_t> spec_verify_steps{0}, spec_drafted{0}, spec_accepted{0};
  std::atomic<int64_t> prompt_tokens{0}, generated_tokens{0};
  std::atomic<int64_t> finished[5] = {0, 0, 0, 0, 0};  // by engine::FinishReason
};

// submit() refusals: the handler answers 503 (with Retry-After for QueueFull).
class QueueFull : public std::runtime_error {
  using std::runtime_error::runtime_error;
};
class ShuttingDown : public std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct SequenceRequest {
  std::vector<int32_t> prompt;
  engine::SamplingParams params;
};

class EngineLoop {
 public:
  // `max_queue` bounds sequences submitted and not yet running (0: no bound); `metrics` (may be
  // null) receives the latency observations.
  EngineLoop(engine::Engine& engine, int64_t max_queue = 0, ServerMetrics* metrics = nullptr);
  ~EngineLoop();  // stop()
  void start();
  void stop();    // finishes every open stream with "abort" and joins the thread

  // Queues the sequences (checked by the caller: Engine::check_request) and returns their
  // stream. Throws QueueFull or ShuttingDown.
  std::shared_ptr<RequestStream> submit(std::vector<SequenceRequest> seqs);
  void abort(const std::shared_ptr<RequestStream>& s);                // every sequence (the client went away)
  void abort(const std::shared_ptr<RequestStream>& s, size_t index);  // one (e.g. a stop string matched)
  // Refuse new submissions (ShuttingDown) from now on; what runs continues.
  void stop_accepting();
  // Finish every sequence submitted or running now with "abort" and `reason`.
  void abort_all(const std::string& reason);
  int64_t num_open() const { return open_.load(); }  // sequences submitted and not finished

  const engine::Engine& engine() const { return engine_; }
  const LoopStats& stats() const { return stats_; }
  std::vector<kv::KvUsage> kv_usage() const;  // as of the last step

 private:
  using Clock = std::chrono::steady_clock;
  void run();
  void publish();
  void fail_all(const std::string& error);

  engine::Engine& engine_;
  const int64_t max_queue_;
  ServerMetrics* metrics_;
  struct Submission {
    std::vector<SequenceRequest> seqs;
    std::shared_ptr<RequestStream> stream;
    Clock::time_point at;
  };
  struct Abort {
    std::shared_ptr<RequestStream> stream;
    std::optional<size_t> index;  // none: all
  };
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Submission> submissions_;
  std::vector<Abort> aborts_;
  std::optional<std::string> abort_all_;
  bool stop_ = false;
  bool accepting_ = true;
  std::atomic<int64_t> queued_{0};  // sequences submitted and not yet running or finished
  std::atomic<int64_t> open_{0};
  LoopStats stats_;
  mutable std::mutex kv_mu_;
  std::vector<kv::KvUsage> kv_;
  std::thread thread_;
  // Loop thread only:
  struct Live {
    std::shared_ptr<RequestStream> stream;
    size_t index = 0;
    Clock::time_point submitted, last_token;
    bool admitted = false, got_token = false;
  };
  std::map<kv::RequestId, Live> live_;
  void finish_live(std::map<kv::RequestId, Live>::iterator it);
};

}  // namespace dsa::server
