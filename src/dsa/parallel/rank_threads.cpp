#include "dsa/parallel/rank_threads.h"

#include <condition_variable>
#include <exception>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "dsa/core/error.h"

namespace dsa::parallel {

namespace {

// One run's outcome per rank: 0 ok, 1 stopped by the group, 2 its own failure (and its message).
struct Outcome {
  std::vector<std::string> errors;
  std::vector<int> failed;
  explicit Outcome(int n) : errors(static_cast<size_t>(n)), failed(static_cast<size_t>(n), 0) {}
};

void run_rank(InProcessGroup& group, int r, const std::function<void(Communicator&)>& fn, Outcome& out) {
  const size_t i = static_cast<size_t>(r);
  try {
    fn(group.rank(r));
  } catch (const GroupStopped& e) {
    out.failed[i] = 1;
    out.errors[i] = e.what();
  } catch (const std::exception& e) {
    out.failed[i] = 2;
    out.errors[i] = e.what();
    group.abort(r, e.what());
  } catch (...) {
    out.failed[i] = 2;
    out.errors[i] = "unknown exception";
    group.abort(r, out.errors[i]);
  }
}

// The cause: the lowest rank that failed on its own; else (a mismatch or a timeout, which every
// rank reports alike) the lowest rank that was stopped. Deterministic whatever the timing.
void rethrow_cause(int n, const Outcome& out) {
  for (int kind : {2, 1})
    for (int r = 0; r < n; ++r)
      if (out.failed[static_cast<size_t>(r)] == kind) fail("rank {} of {}: {}", r, n, out.errors[static_cast<size_t>(r)]);
}

}  // namespace

void run_ranks(InProcessGroup& group, const std::function<void(Communicator&)>& fn) {
  const int n = group.size();
  Outcome out(n);
  std::vector<std::thread> threads;
  for (int r = 1; r < n; ++r) threads.emplace_back([&, r] { run_rank(group, r, fn, out); });
  run_rank(group, 0, fn, out);  // rank 0 on the calling thread
  for (std::thread& t : threads) t.join();
  rethrow_cause(n, out);
}

struct RankThreads::State {
  InProcessGroup& group;
  std::mutex m;
  std::condition_variable start, done;
  uint64_t generation = 0;  // bumped per run: a worker runs each generation once
  int pending = 0;          // workers still running the current generation
  bool stop = false;
  const std::function<void(Communicator&)>* fn = nullptr;
  Outcome* out = nullptr;
  std::vector<std::thread> threads;

  explicit State(InProcessGroup& g) : group(g) {}

  void worker(int r) {
    uint64_t seen = 0;
    for (;;) {
      std::unique_lock lk(m);
      start.wait(lk, [&] { return stop || generation != seen; });
      if (stop) return;
      seen = generation;
      const auto* f = fn;
      Outcome* o = out;
      lk.unlock();
      run_rank(group, r, *f, *o);
      lk.lock();
      if (--pending == 0) done.notify_one();
    }
  }
};

RankThreads::RankThreads(InProcessGroup& group) : s_(std::make_unique<State>(group)) {
  for (int r = 1; r < group.size(); ++r) s_->threads.emplace_back([this, r] { s_->worker(r); });
}

RankThreads::~RankThreads() {
  {
    std::lock_guard lk(s_->m);
    s_->stop = true;
  }
  s_->start.notify_all();
  for (std::thread& t : s_->threads) t.join();
}

void RankThreads::run(const std::function<void(Communicator&)>& fn) {
  const int n = s_->group.size();
  Outcome out(n);
  {
    std::lock_guard lk(s_->m);
    s_->fn = &fn;
    s_->out = &out;
    s_->pending = n - 1;
    ++s_->generation;
  }
  s_->start.notify_all();
  run_rank(s_->group, 0, fn, out);  // rank 0 on the calling thread
  {
    std::unique_lock lk(s_->m);
    s_->done.wait(lk, [&] { return s_->pending == 0; });
    s_->fn = nullptr;
    s_->out = nullptr;
  }
  rethrow_cause(n, out);
}

}  // namespace dsa::parallel
