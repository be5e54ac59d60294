// Communicator: the collectives a tensor-parallel forward calls, over a group of `size()` ranks
// that all call the same collectives in the same order (SPMD). Implementations: InProcessGroup
// (ranks as threads of one process exchanging through host memory: CPU tests, one GPU) and NCCL
// (nccl_communicator.h: GPUs of one or several machines).
//
// Every collective is blocking for the calling rank's data: when it returns, the tensor holds
// the result (NCCL: enqueued on the thread's current stream, in stream order). Misuse (ranks in
// different collectives, shapes or dtypes that differ across ranks) throws dsa::Error naming the
// collective, the ranks and their shapes on every rank, never a hang or silent garbage.
#pragma once
#include <chrono>
#include <cstddef>
#include <cstdint>

#include "dsa/core/error.h"
#include "dsa/core/tensor.h"

namespace dsa::parallel {

// What a rank's collective throws when the group stopped (another rank failed, ranks disagree,
// a timeout): run_ranks tells these apart from a rank's own failure.
class GroupStopped : public Error {
 public:
  using Error::Error;
};

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual const char* kind() const = 0;  // "in-process", "nccl"

  // In place: t = sum over ranks of t. f32 or bf16, contiguous, same shape on every rank.
  virtual void all_reduce_sum(const Tensor& t) = 0;
  // out [size * n][...] = the ranks' in [n][...] concatenated along dim 0 in rank order.
  virtual void all_gather(const Tensor& in, const Tensor& out) = 0;
  // Every rank's t (same shape and dtype everywhere) becomes root's.
  virtual void broadcast(const Tensor& t, int root) = 0;
  // `bytes` bytes at data (the same count on every rank) become root's.
  virtual void broadcast_bytes(void* data, size_t bytes, int root) = 0;
  virtual void barrier() = 0;
  // How long a rank waits for the others in one collective before the group stops (where the
  // implementation bounds waits; in-process: fixed at creation, NCCL: none). A rank that idles
  // until the next step arrives raises it for that wait.
  virtual void set_wait_timeout(std::chrono::milliseconds) {}
  virtual std::chrono::milliseconds wait_timeout() const { return std::chrono::milliseconds(0); }  // 0: not bounded here

  // Payload bytes this rank has passed to collectives (the tensors' sizes, not wire traffic).
  uint64_t collective_bytes() const { return bytes_; }

 protected:
  void count_bytes(uint64_t b) { bytes_ += b; }

 private:
  uint64_t bytes_ = 0;
};

// Throws unless t is a defined contiguous tensor of an all-reduce dtype (f32, bf16).
void check_reducible(const Tensor& t, const char* op);
// Throws unless in and out are contiguous, same dtype, and out is in's shape with dim 0 times n.
void check_all_gather(const Tensor& in, const Tensor& out, int n, int rank);

}  // namespace dsa::parallel
