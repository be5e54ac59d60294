// The explicit registry of tunable kernel families. Each family has a factory that makes its
// op instances for a model on a CUDA device (one instance per distinct static configuration,
// e.g. one sparse-attention op per attention kind of the model). A family whose kernels are
// not in this build yet is listed with no factory and a note, so `dsa tune` can say so.
//
// To plug in a family: add its factory to the list in families.cpp (no static initializers:
// the library is static and unreferenced objects would be dropped).
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "dsa/tune/plan_model.h"
#include "dsa/tune/tunable_op.h"
#include "dsa/tune/warmup_plan.h"

namespace dsa::tune {

using OpFactory =
    std::function<std::vector<std::unique_ptr<TunableOp>>(const PlanModel&, const EngineLimits&, int device)>;

struct TunableFamily {
  std::string name;   // e.g. "sparse_mla_decode"
  std::string help;   // what it tunes
  OpFactory make;     // empty: not in this build yet
  std::string note;   // why not, when make is empty
};

const std::vector<TunableFamily>& tunable_families();

struct TunableOps {
  std::vector<std::unique_ptr<TunableOp>> ops;
  std::vector<std::string> notes;  // families not available, and why
  std::vector<TunableOp*> pointers() const;
};
// Every available family's ops for `model` on CUDA device `device`.
TunableOps make_tunable_ops(const PlanModel& model, const EngineLimits& limits, int device);

}  // namespace dsa::tune
