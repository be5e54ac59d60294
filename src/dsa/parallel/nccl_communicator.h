// The NCCL communicator: one rank of a group of GPUs (one process per GPU, or one thread per GPU
// of a process), created with ncclCommInitRank from a unique id that rank 0 makes and hands to
// the others (in-process, or over TCP for several machines: not yet). Collectives go to the
// calling thread's current stream (core/cuda_stream.h); tensors must live on the rank's device.
// NCCL's bf16 all-reduce rounds to bf16 at each reduction step (the in-process group sums in
// f32 and rounds once), so the two agree to bf16 rounding, not bit for bit.
//
// Built only with CUDA and NCCL (CMake DSA_NCCL=AUTO|ON|OFF); otherwise nccl_available() is
// false and the functions below throw an error saying so.
#pragma once
#include <array>
#include <memory>

#include "dsa/parallel/communicator.h"

namespace dsa::parallel {

bool nccl_available();

struct NcclUniqueId {
  std::array<char, 128> bytes{};  // NCCL_UNIQUE_ID_BYTES
};

NcclUniqueId nccl_unique_id();  // rank 0 makes it; every rank passes the same id
// Joins the group as `rank` of `size` on CUDA device `device` (blocks until all ranks joined).
std::unique_ptr<Communicator> make_nccl_communicator(int rank, int size, const NcclUniqueId& id, int device);

}  // namespace dsa::parallel
