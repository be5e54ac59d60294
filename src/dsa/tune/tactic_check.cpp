#include "dsa/tune/tactic_check.h"

#include <fmt/format.h>

#include "dsa/tune/timing.h"
#include "dsa/tune/tuner.h"

namespace dsa::tune {

std::vector<TacticCheckFailure> check_all_tactics(TunableOp& op, const Dims& dims,
                                                  const std::function<std::string(const Tactic&)>& compare,
                                                  const std::function<void()>& before) {
  std::vector<TacticCheckFailure> out;
  op.prepare(dims);
  for (const auto& t : tactics_to_try(op, dims)) {
    if (before) before();
    std::string err = run_once(op, t.id, dims);  // synchronises CUDA ops and collects their errors
    if (!err.empty()) {
      out.push_back({t, "threw: " + err});
      continue;
    }
    std::string diff = compare(t);
    if (!diff.empty()) out.push_back({t, diff});
  }
  op.release();
  return out;
}

std::string describe(const std::vector<TacticCheckFailure>& failures) {
  std::string s;
  for (const auto& f : failures)
    s += fmt::format("{}tactic {} ({}): {}", s.empty() ? "" : "; ", f.tactic.id, f.tactic.description, f.message);
  return s;
}

}  // namespace dsa::tune
