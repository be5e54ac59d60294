// Candidate order of attention backends per platform: the first valid candidate wins. One row
// per capability family the engine targets; today every CUDA row holds the portable kernel and
// the CPU row the reference. Arch-specific kernels (SM90 wgmma, SM100, SM120 block-scaled) go in
// front of cuda_sparse_mla in their rows when they land.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "dsa/core/device.h"

namespace dsa::attn {

struct PriorityRow {
  std::string platform;  // "cpu", "8.0", "9.x", ...
  std::vector<std::string> backends;
};

// The whole table (documentation, `dsa info`, tests).
const std::vector<PriorityRow>& attention_priority_table();

// Candidates for a platform: nullopt = CPU. An exact capability row wins over a major.x row;
// capabilities without a row get the generic CUDA list (and are then rejected with reasons).
std::vector<std::string> attention_backend_priority(const std::optional<Capability>& capability);

}  // namespace dsa::attn
