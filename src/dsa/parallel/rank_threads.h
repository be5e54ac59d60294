// run_ranks: runs fn(comm) once per rank of an in-process group, each on its own thread, and
// joins them. A rank that throws aborts the group (so the others stop waiting in their
// collectives with an error naming it); run_ranks then rethrows the failed rank's own error
// (the cause: the lowest rank that failed on its own, not the others' GroupStopped errors),
// prefixed with its rank.
//
// RankThreads: the same contract, with ranks 1..N-1 on threads that live as long as the object
// and rank 0 on the caller's thread. A tensor-parallel engine runs every rank once per step,
// hundreds of times a second; starting a thread per rank per step cost tens of microseconds,
// and a rank keeps its thread (so its thread-local state, such as the CUDA device, too).
#pragma once
#include <functional>
#include <memory>

#include "dsa/parallel/in_process_group.h"

namespace dsa::parallel {

void run_ranks(InProcessGroup& group, const std::function<void(Communicator&)>& fn);

class RankThreads {
 public:
  explicit RankThreads(InProcessGroup& group);
  ~RankThreads();  // stops and joins the threads (after the run in progress, if any)
  RankThreads(const RankThreads&) = delete;
  RankThreads& operator=(const RankThreads&) = delete;
  // As run_ranks. One caller at a time.
  void run(const std::function<void(Communicator&)>& fn);

 private:
  struct State;
  std::unique_ptr<State> s_;
};

}  // namespace dsa::parallel
