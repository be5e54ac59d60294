// Whether dsa's kernels launch with programmatic dependent launch on the current device (the
// kernel-side contract and the launch helper are in pdl.cuh). Plain C++: callable from any
// translation unit and from builds without CUDA (then always false).
#pragma once

namespace dsa::pdl {

// True when kernels launched now on the current device may overlap their predecessor: the code
// that runs on the device was built for SM90 or later (checked once per device on a probe kernel,
// so PTX JIT-compiled for an older architecture never runs a kernel without its wait) and the
// environment variable DSA_PDL is "1" (read once per process). Off by default: it speeds up
// eager steps, not replayed decode graphs (docs/kernels.md, "Kernel boundaries").
bool enabled();

// True when enabled() and DSA_PDL_PREFETCH is unset or not "0": kernels whose weights are known
// before their wait (dense linears) prefetch them into L2 while the kernel before them finishes.
bool prefetch_weights();

}  // namespace dsa::pdl
