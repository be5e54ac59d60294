// EngineLoop: runs an engine::Engine on its own thread for the HTTP handlers. Handlers submit a
// request (already checked with check_request) and get a RequestStream they wait on; the loop
// thread adds queued requests and aborts between steps, runs step() while anything is
// unfinished, and pushes each step's new tokens / finish into the streams. The Engine itself is
// touched only by the loop thread.
#pragma once
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "dsa/engine/engine.h"

namespace dsa::server {

// What a request's stream receives: tokens as they are made, then one finished event.
struct StreamEvent {
  std::vector<int32_t> tokens;
  engine::FinishReason finish = engine::FinishReason::None;
  std::string error;
  int64_t prompt_tokens = 0, completion_tokens = 0;
};

class RequestStream {
 public:
  // Waits up to `timeout` for events; returns those that came (empty on timeout).
  std::vector<StreamEvent> wait(std::chrono::milliseconds timeout);
  void push(StreamEvent e);
  bool finished() const;

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<StreamEvent> events_;
  bool finished_ = false;
};

// Counters the loop thread publishes after every step (read by /metrics from any thread).
struct LoopStats {
  std::atomic<int64_t> running{0}, waiting{0}, preemptions{0}, steps{0};
  std::atomic<int64_t> prompt_tokens{0}, generated_tokens{0};
  std::atomic<int64_t> finished[5] = {0, 0, 0, 0, 0};  // by engine::FinishReason
};

class EngineLoop {
 public:
  explicit EngineLoop(engine::Engine& engine);
  ~EngineLoop();  // stop()
  void start();
  void stop();    // finishes every open stream with "abort" and joins the thread

  std::shared_ptr<RequestStream> submit(std::vector<int32_t> prompt, const engine::SamplingParams& params);
  void abort(const std::shared_ptr<RequestStream>& s);  // e.g. the client went away
  const engine::Engine& engine() const { return engine_; }
  const LoopStats& stats() const { return stats_; }

 private:
  void run();

  engine::Engine& engine_;
  struct Submission {
    std::vector<int32_t> prompt;
    engine::SamplingParams params;
    std::shared_ptr<RequestStream> stream;
  };
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Submission> submissions_;
  std::vector<std::shared_ptr<RequestStream>> aborts_;
  bool stop_ = false;
  LoopStats stats_;
  std::thread thread_;
  // Loop thread only:
  std::map<uint64_t, std::shared_ptr<RequestStream>> live_;
};

}  // namespace dsa::server
