// Timing one tactic of a tunable op: warm-ups, then timed repeats, median. CUDA ops are timed
// with CUDA events around each repeat on the op's stream; CPU ops (and every op in a build
// without CUDA) with std::chrono::steady_clock. A tactic that throws, or leaves a CUDA error,
// is reported as failed, never rethrown. Only a CUDA context that is broken for good (a sticky
// error such as an illegal address) raises dsa::Error: nothing on that device can run after it.
#pragma once
#include <string>

#include "dsa/core/error.h"
#include "dsa/tune/tunable_op.h"

namespace dsa::tune {

// A tactic left the CUDA context unusable (sticky error): tuning on this device must stop.
class CudaContextLost : public Error {
 public:
  using Error::Error;
};

struct TimingOptions {
  int warmups = 3;
  int repeats = 15;
};

struct TacticTiming {
  Tactic tactic;
  bool ok = false;
  double median_us = 0;  // valid when ok
  std::string error;     // why not, when !ok
};

TacticTiming time_tactic(TunableOp& op, const Tactic& tactic, const Dims& dims, const TimingOptions& opt);

// Runs the tactic once (warm-up without timing; used when a bucket is already tuned so that
// the first real request pays no first-launch cost). Returns "" or the error.
std::string run_once(TunableOp& op, int tactic, const Dims& dims);

}  // namespace dsa::tune
