#include "dsa/server/engine_loop.h"

#include "dsa/core/log.h"

namespace dsa::server {

std::vector<StreamEvent> RequestStream::wait(std::chrono::milliseconds timeout) {
  std::unique_lock lk(mu_);
  cv_.wait_for(lk, timeout, [&] { return !events_.empty(); });
  std::vector<StreamEvent> out(std::make_move_iterator(events_.begin()), std::make_move_iterator(events_.end()));
  events_.clear();
  return out;
}

void RequestStream::push(StreamEvent e) {
  {
    std::lock_guard lk(mu_);
    if (finished_) return;
    if (e.finish != engine::FinishReason::None) finished_ = true;
    events_.push_back(std::move(e));
  }
  cv_.notify_all();
}

bool RequestStream::finished() const {
  std::lock_guard lk(mu_);
  return finished_;
}

EngineLoop::EngineLoop(engine::Engine& engine) : engine_(engine) {}

EngineLoop::~EngineLoop() { stop(); }

void EngineLoop::start() {
  std::lock_guard lk(mu_);
  if (thread_.joinable()) return;
  stop_ = false;
  thread_ = std::thread([this] { run(); });
}

void EngineLoop::stop() {
  {
    std::lock_guard lk(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  // Nothing runs now: close what is left (submissions never added, requests in the engine).
  std::lock_guard lk(mu_);
  for (Submission& s : submissions_) s.stream->push({{}, engine::FinishReason::Abort, "the server is stopping"});
  submissions_.clear();
  for (auto& [id, s] : live_) {
    engine_.abort(id);
    s->push({{}, engine::FinishReason::Abort, "the server is stopping"});
  }
  live_.clear();
  if (engine_.has_unfinished()) engine_.step();  // drains the abort reports
}

std::shared_ptr<RequestStream> EngineLoop::submit(std::vector<int32_t> prompt, const engine::SamplingParams& params) {
  auto s = std::make_shared<RequestStream>();
  {
    std::lock_guard lk(mu_);
    if (stop_) {
      s->push({{}, engine::FinishReason::Abort, "the server is stopping"});
      return s;
    }
    submissions_.push_back({std::move(prompt), params, s});
  }
  cv_.notify_all();
  return s;
}

void EngineLoop::abort(const std::shared_ptr<RequestStream>& s) {
  {
    std::lock_guard lk(mu_);
    aborts_.push_back(s);
  }
  cv_.notify_all();
}

void EngineLoop::run() {
  for (;;) {
    std::vector<Submission> subs;
    std::vector<std::shared_ptr<RequestStream>> aborts;
    {
      std::unique_lock lk(mu_);
      cv_.wait(lk, [&] { return stop_ || !submissions_.empty() || !aborts_.empty() || engine_.has_unfinished(); });
      if (stop_) return;
      subs.swap(submissions_);
      aborts.swap(aborts_);
    }
    for (Submission& s : subs) {
      try {
        live_[engine_.add_request(std::move(s.prompt), s.params)] = s.stream;
      } catch (const std::exception& e) {  // checked by the handler already; a race-free second look
        s.stream->push({{}, engine::FinishReason::Error, e.what()});
      }
    }
    for (const auto& a : aborts)
      for (auto it = live_.begin(); it != live_.end(); ++it)
        if (it->second == a) {
          engine_.abort(it->first);
          break;
        }
    if (!engine_.has_unfinished()) continue;
    std::vector<engine::StepOutput> outs;
    try {
      outs = engine_.step();
    } catch (const std::exception& e) {
      // A forward failed: every open request fails with the reason; the engine drops them.
      log_error("server: engine step failed: {}", e.what());
      for (auto& [id, s] : live_) {
        engine_.abort(id);
        s->push({{}, engine::FinishReason::Error, std::string("engine step failed: ") + e.what()});
      }
      live_.clear();
      try {
        engine_.step();  // drains the abort reports
      } catch (const std::exception&) {
      }
      continue;
    }
    ++stats_.steps;
    stats_.running = static_cast<int64_t>(engine_.num_running());
    stats_.waiting = static_cast<int64_t>(engine_.num_waiting());
    stats_.preemptions = engine_.num_preemptions();
    for (engine::StepOutput& o : outs) {
      stats_.generated_tokens += static_cast<int64_t>(o.new_tokens.size());
      if (o.finished()) {
        ++stats_.finished[static_cast<int>(o.finish)];
        stats_.prompt_tokens += o.prompt_tokens;
      }
      auto it = live_.find(o.id);
      if (it == live_.end()) continue;
      it->second->push({std::move(o.new_tokens), o.finish, o.error, o.prompt_tokens, o.completion_tokens});
      if (o.finished()) live_.erase(it);
    }
  }
}

}  // namespace dsa::server
