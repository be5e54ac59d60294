// Host side of the portable CUDA sparse-MLA backend: argument packing, split workspace, launches.
#pragma once
#include <optional>
#include <string>

#include "dsa/ops/sparse_mla/sparse_mla.h"

namespace dsa::ops::sparse_mla_cuda {

// Runs the decode kernel (+ combine when t.splits > 1) on p's stream. p must be validated.
void launch(const SparseMlaParams& p, const SparseMlaTactic& t);
// nullopt when the kernels can run on `device`, else why not (no device, capability < 8.9,
// no kernel image for it in this build).
std::optional<std::string> unsupported_reason(int device);

}  // namespace dsa::ops::sparse_mla_cuda
