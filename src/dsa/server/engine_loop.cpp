#include "dsa/server/engine_loop.h"

#include <fmt/format.h>

#include "dsa/core/error.h"
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
    if (e.index >= open_.size() || !open_[e.index]) return;
    if (e.finish != engine::FinishReason::None) {
      open_[e.index] = false;
      --left_;
    }
    events_.push_back(std::move(e));
  }
  cv_.notify_all();
}

bool RequestStream::finished() const {
  std::lock_guard lk(mu_);
  return left_ == 0;
}

namespace {
StreamEvent finish_event(size_t index, engine::FinishReason r, std::string error) {
  StreamEvent e;
  e.index = index;
  e.finish = r;
  e.error = std::move(error);
  return e;
}
}  // namespace

EngineLoop::EngineLoop(engine::Engine& engine, int64_t max_queue, ServerMetrics* metrics)
    : engine_(engine), max_queue_(max_queue), metrics_(metrics) {
  DSA_CHECK(max_queue >= 0, "server: max queue must be >= 0, got {}", max_queue);
}

EngineLoop::~EngineLoop() { stop(); }

void EngineLoop::start() {
  std::lock_guard lk(mu_);
  if (thread_.joinable()) return;
  stop_ = false;
  publish();
  thread_ = std::thread([this] { run(); });
}

void EngineLoop::stop() {
  {
    std::lock_guard lk(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  // Nothing runs now: close what is left (submissions never added, sequences in the engine).
  std::lock_guard lk(mu_);
  for (Submission& s : submissions_)
    for (size_t i = 0; i < s.seqs.size(); ++i) {
      s.stream->push(finish_event(i, engine::FinishReason::Abort, "the server is stopping"));
      --queued_;
      --open_;
    }
  submissions_.clear();
  fail_all("the server is stopping");
}

std::shared_ptr<RequestStream> EngineLoop::submit(std::vector<SequenceRequest> seqs) {
  DSA_CHECK(!seqs.empty(), "server: a submission without sequences");
  const int64_t k = static_cast<int64_t>(seqs.size());
  auto s = std::make_shared<RequestStream>(seqs.size());
  {
    std::lock_guard lk(mu_);
    if (stop_ || !accepting_) throw ShuttingDown("the server is shutting down");
    if (max_queue_ > 0 && queued_.load() + k > max_queue_)
      throw QueueFull(fmt::format("the server is busy: {} sequences are waiting (at most {}); retry later",
                                  queued_.load(), max_queue_));
    queued_ += k;
    open_ += k;
    submissions_.push_back({std::move(seqs), s, Clock::now()});
  }
  cv_.notify_all();
  return s;
}

void EngineLoop::abort(const std::shared_ptr<RequestStream>& s) {
  {
    std::lock_guard lk(mu_);
    aborts_.push_back({s, std::nullopt});
  }
  cv_.notify_all();
}

void EngineLoop::abort(const std::shared_ptr<RequestStream>& s, size_t index) {
  {
    std::lock_guard lk(mu_);
    aborts_.push_back({s, index});
  }
  cv_.notify_all();
}

void EngineLoop::stop_accepting() {
  std::lock_guard lk(mu_);
  accepting_ = false;
}

void EngineLoop::abort_all(const std::string& reason) {
  {
    std::lock_guard lk(mu_);
    abort_all_ = reason;
  }
  cv_.notify_all();
}

std::vector<kv::KvUsage> EngineLoop::kv_usage() const {
  std::lock_guard lk(kv_mu_);
  return kv_;
}

void EngineLoop::publish() {
  stats_.running = static_cast<int64_t>(engine_.num_running());
  stats_.waiting = static_cast<int64_t>(engine_.num_waiting());
  stats_.preemptions = engine_.num_preemptions();
  if (const engine::StepGraphs* g = engine_.runner().graphs()) {
    stats_.graph_captures = g->stats().captures;
    stats_.graph_replays = g->stats().replays;
  }
  stats_.spec_verify_steps = engine_.spec_stats().verify_steps;
  stats_.spec_drafted = engine_.spec_stats().drafted;
  stats_.spec_accepted = engine_.spec_stats().accepted;
  try {
    auto kv = engine_.kv_usage();
    std::lock_guard lk(kv_mu_);
    kv_ = std::move(kv);
  } catch (const std::exception& e) {
    log_warn_once("server-kv-usage", fmt::format("server: cannot read the KV usage: {}", e.what()));
  }
}

void EngineLoop::finish_live(std::map<kv::RequestId, Live>::iterator it) {
  if (!it->second.admitted) --queued_;
  --open_;
  live_.erase(it);
}

// Aborts every live sequence with `error` and drains the engine's reports.
void EngineLoop::fail_all(const std::string& error) {
  for (auto it = live_.begin(); it != live_.end();) {
    engine_.abort(it->first);
    it->second.stream->push(finish_event(it->second.index, engine::FinishReason::Abort, error));
    auto next = std::next(it);
    finish_live(it);
    it = next;
  }
  try {
    if (engine_.has_unfinished())
      for (const engine::StepOutput& o : engine_.step())  // reports the aborts; runs nothing else
        if (o.finished()) {
          ++stats_.finished[static_cast<int>(o.finish)];
          stats_.prompt_tokens += o.prompt_tokens;
        }
  } catch (const std::exception&) {
  }
  publish();
}

void EngineLoop::run() {
  for (;;) {
    std::vector<Submission> subs;
    std::vector<Abort> aborts;
    std::optional<std::string> abort_all;
    {
      std::unique_lock lk(mu_);
      cv_.wait(lk, [&] {
        return stop_ || !submissions_.empty() || !aborts_.empty() || abort_all_ || engine_.has_unfinished();
      });
      if (stop_) return;
      subs.swap(submissions_);
      aborts.swap(aborts_);
      abort_all.swap(abort_all_);
    }
    for (Submission& s : subs)
      for (size_t i = 0; i < s.seqs.size(); ++i) {
        try {
          live_[engine_.add_request(std::move(s.seqs[i].prompt), s.seqs[i].params)] = {s.stream, i, s.at, s.at};
        } catch (const std::exception& e) {  // checked by the handler already; a race-free second look
          s.stream->push(finish_event(i, engine::FinishReason::Error, e.what()));
          ++stats_.finished[static_cast<int>(engine::FinishReason::Error)];
          --queued_;
          --open_;
        }
      }
    if (abort_all) fail_all(*abort_all);
    for (const Abort& a : aborts)
      for (auto it = live_.begin(); it != live_.end();) {
        auto next = std::next(it);
        if (it->second.stream == a.stream && (!a.index || *a.index == it->second.index)) {
          engine_.abort(it->first);
          it->second.stream->push(finish_event(it->second.index, engine::FinishReason::Abort, "aborted"));
          finish_live(it);
        }
        it = next;
      }
    if (!engine_.has_unfinished()) {
      publish();
      continue;
    }
    const Clock::time_point step_start = Clock::now();
    std::vector<engine::StepOutput> outs;
    try {
      outs = engine_.step();
    } catch (const std::exception& e) {
      // A forward failed: every open sequence fails with the reason; the engine drops them.
      log_error("server: engine step failed: {}", e.what());
      for (auto it = live_.begin(); it != live_.end();) {
        engine_.abort(it->first);
        it->second.stream->push(
            finish_event(it->second.index, engine::FinishReason::Error, std::string("engine step failed: ") + e.what()));
        ++stats_.finished[static_cast<int>(engine::FinishReason::Error)];
        auto next = std::next(it);
        finish_live(it);
        it = next;
      }
      try {
        engine_.step();  // drains the abort reports
      } catch (const std::exception&) {
      }
      publish();
      continue;
    }
    ++stats_.steps;
    const Clock::time_point now = Clock::now();
    auto seconds = [](Clock::duration d) { return std::chrono::duration<double>(d).count(); };
    for (engine::StepOutput& o : outs) {
      stats_.generated_tokens += static_cast<int64_t>(o.new_tokens.size());
      if (o.finished()) {
        ++stats_.finished[static_cast<int>(o.finish)];
        stats_.prompt_tokens += o.prompt_tokens;
      }
      auto it = live_.find(o.id);
      if (it == live_.end()) continue;  // aborted by us already
      Live& l = it->second;
      if (!l.admitted && !o.new_tokens.empty()) {
        l.admitted = true;
        --queued_;
        if (metrics_) metrics_->queue_time.observe(seconds(step_start - l.submitted));
      }
      if (!o.new_tokens.empty() && metrics_) {
        if (!l.got_token)
          metrics_->ttft.observe(seconds(now - l.submitted));
        else
          metrics_->inter_token.observe(seconds(now - l.last_token));
      }
      if (!o.new_tokens.empty()) {
        l.got_token = true;
        l.last_token = now;
      }
      StreamEvent e;
      e.index = l.index;
      e.tokens = std::move(o.new_tokens);
      e.logprobs = std::move(o.logprobs);
      e.prompt_logprobs = std::move(o.prompt_logprobs);
      e.finish = o.finish;
      e.error = o.error;
      e.prompt_tokens = o.prompt_tokens;
      e.completion_tokens = o.completion_tokens;
      l.stream->push(std::move(e));
      if (o.finished()) {
        if (metrics_) metrics_->e2e.observe(seconds(now - l.submitted));
        finish_live(it);
      }
    }
    for (auto& [id, l] : live_)
      if (!l.admitted && engine_.is_running(id)) {
        l.admitted = true;
        --queued_;
        if (metrics_) metrics_->queue_time.observe(seconds(step_start - l.submitted));
      }
    publish();
  }
}

}  // namespace dsa::server
