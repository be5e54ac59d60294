// Tuning changes speed only. check_all_tactics() lets an op's test show it: it prepares the op
// at `dims`, and for every tactic (default first) calls `before` (e.g. poison the outputs),
// runs the tactic, and calls `compare`, which checks the op's outputs against the reference
// and returns "" when they match within tolerance, else what differs. It returns one failure
// per tactic that threw or whose output did not match (empty: every tactic is correct).
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "dsa/tune/tunable_op.h"

namespace dsa::tune {

struct TacticCheckFailure {
  Tactic tactic;
  std::string message;
};

std::vector<TacticCheckFailure> check_all_tactics(TunableOp& op, const Dims& dims,
                                                  const std::function<std::string(const Tactic&)>& compare,
                                                  const std::function<void()>& before = {});

// "tactic 3 (splits=8): max abs error 0.2 at [4][1]; tactic 5 (...): threw ..." ("" when none).
std::string describe(const std::vector<TacticCheckFailure>& failures);

}  // namespace dsa::tune
