#include "dsa/parallel/rank_threads.h"

#include <exception>
#include <thread>

#include "dsa/core/error.h"

namespace dsa::parallel {

void run_ranks(InProcessGroup& group, const std::function<void(Communicator&)>& fn) {
  const int n = group.size();
  std::vector<std::string> errors(static_cast<size_t>(n));
  std::vector<int> failed(static_cast<size_t>(n), 0);  // 1: stopped by the group, 2: its own failure
  auto body = [&](int r) {
    const size_t i = static_cast<size_t>(r);
    try {
      fn(group.rank(r));
    } catch (const GroupStopped& e) {
      failed[i] = 1;
      errors[i] = e.what();
    } catch (const std::exception& e) {
      failed[i] = 2;
      errors[i] = e.what();
      group.abort(r, e.what());
    } catch (...) {
      failed[i] = 2;
      errors[i] = "unknown exception";
      group.abort(r, errors[i]);
    }
  };
  std::vector<std::thread> threads;
  for (int r = 1; r < n; ++r) threads.emplace_back(body, r);
  body(0);  // rank 0 on the calling thread
  for (std::thread& t : threads) t.join();
  // The cause: the lowest rank that failed on its own; else (a mismatch or a timeout, which
  // every rank reports alike) the lowest rank that was stopped. Deterministic whatever the timing.
  for (int kind : {2, 1})
    for (int r = 0; r < n; ++r)
      if (failed[static_cast<size_t>(r)] == kind) fail("rank {} of {}: {}", r, n, errors[static_cast<size_t>(r)]);
}

}  // namespace dsa::parallel
