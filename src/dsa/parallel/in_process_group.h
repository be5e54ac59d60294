// InProcessGroup: `size` ranks as threads of one process, each with its own Communicator
// (rank(r)), exchanging through host memory. Runs every sharded path without several GPUs.
//
// Reductions are deterministic: element i of an all-reduce is ((0 + t_0[i]) + t_1[i]) + ...
// in f32, in rank order, computed once and copied to every rank, so all ranks get the same bits
// whatever the thread timing (bf16 is rounded once, after the f32 sum).
// Tensors may live on the CPU or on a CUDA device (staged through host copies: correct, not fast).
//
// Abort: abort(rank, why) — called by whoever catches a rank's exception (run_ranks does) —
// wakes every rank waiting in a collective with an error naming the failed rank and its reason;
// after it every collective throws at once. A rank that does not arrive within `timeout` aborts
// the group too (the error names the missing ranks), so a stuck rank cannot hang the others.
#pragma once
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "dsa/core/error.h"
#include "dsa/parallel/communicator.h"

namespace dsa::parallel {

struct InProcessOptions {
  std::chrono::milliseconds timeout{std::chrono::minutes(10)};  // per wait in one collective
};

class InProcessGroup {
 public:
  explicit InProcessGroup(int size, const InProcessOptions& opt = {});
  ~InProcessGroup();
  InProcessGroup(const InProcessGroup&) = delete;
  InProcessGroup& operator=(const InProcessGroup&) = delete;

  int size() const;
  Communicator& rank(int r);
  // First call wins: its rank and reason are what every waiting and later collective reports.
  void abort(int rank, const std::string& why);
  bool aborted() const;
  int aborted_by() const;  // the rank of the first abort, -1 if none (or a timeout / mismatch)

  struct State;

 private:
  std::unique_ptr<State> state_;
  std::vector<std::unique_ptr<Communicator>> ranks_;
};

}  // namespace dsa::parallel
