// The TCP group: ranks in separate processes (on one machine or several) joined over TCP at one
// address, `--dist-init-addr HOST:PORT`. It serves two purposes:
//   - the multi-process start-up: rank 0 listens, every other rank connects and says who it is
//     (rank, world size, fingerprint); rank 0 admits the group only when every rank came, with
//     distinct ranks, the same world size and the same fingerprint (build and model config: a
//     mismatch is refused on every rank with an error naming the rank, the field and both
//     values). Over it rank 0 then hands out what the others need before anything else runs,
//     such as the NCCL unique id (broadcast_bytes).
//   - a Communicator in its own right, for CPU ranks in several processes (and tests of the
//     multi-process path without GPUs): star-shaped through rank 0, which checks that every rank
//     called the same collective with the same shapes, sums in f32 in rank order (the in-process
//     group's rule, so the same bits), and sends each rank what it needs. Tensors on a CUDA
//     device are staged through host copies: correct, not fast (GPUs use NCCL).
// A rank that dies closes its connections: the others' next collective fails with an error
// naming it instead of hanging; every wait is bounded (`timeout` per collective, `startup_timeout`
// for the start-up). After a failure every collective throws GroupStopped at once.
#pragma once
#include <chrono>
#include <memory>
#include <string>

#include "dsa/parallel/communicator.h"
#include "dsa/parallel/tcp_socket.h"

namespace dsa::parallel {

struct TcpGroupOptions {
  std::chrono::milliseconds startup_timeout{std::chrono::minutes(5)};  // connecting + every rank joined
  std::chrono::milliseconds timeout{std::chrono::minutes(10)};         // per wait in one collective
  // "key=value" lines that must be equal on every rank (build, model config, parallel layout).
  std::string fingerprint;
};

// Joins as `rank` of `size`. Rank 0 listens at `addr` (or on `listener`, made beforehand, e.g.
// on port 0 in tests); the others connect to `addr`. Returns once the whole group has joined.
std::unique_ptr<Communicator> tcp_group_join(int rank, int size, const HostPort& addr, const TcpGroupOptions& opt,
                                             TcpListener* listener = nullptr);

// The first "key=value" line on which two fingerprints differ, as "KEY: 'A' vs 'B'" (a line
// without '=' is its own key); empty when they are equal.
std::string fingerprint_difference(const std::string& a, const std::string& b);

}  // namespace dsa::parallel
