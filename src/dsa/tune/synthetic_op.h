// SyntheticOp: a CPU tunable op whose costs are known in advance, for the tuner's tests and
// `dsa tune --selftest` (which exercises plan, tuner, cache and progress bar on any machine).
// Tactic t busy-waits cost_units(t, tokens) * unit_us microseconds and then writes its output:
// the sum 1 + 2 + ... + tokens, computed in a tactic-specific order (same value for all).
//   ideal(T)  = log2(bucket T) mod num_tactics   (the tactic that is fastest at T)
//   cost(t)   = 1 unit when t == ideal, else 2 + ((t - ideal) mod num_tactics) units
//   default   = num_tactics + 2 units (slowest, always works)
// Tactic `failing_tactic` throws dsa::Error (even where it would be the fastest); tactic
// `wrong_tactic` computes a wrong sum (to show that tactic checks can fail).
#pragma once
#include <cstdint>
#include <string>

#include "dsa/tune/tunable_op.h"

namespace dsa::tune {

class SyntheticOp : public TunableOp {
 public:
  struct Config {
    std::string name = "synthetic";
    std::string signature = "synthetic:4-tactics:v1";
    std::string instance = "";
    int num_tactics = 4;
    int failing_tactic = 2;  // -2: none
    int wrong_tactic = -2;   // -2: none
    double unit_us = 50;
  };
  SyntheticOp() = default;
  explicit SyntheticOp(Config c) : cfg_(std::move(c)) {}

  std::string name() const override { return cfg_.name; }
  std::string instance_key() const override { return cfg_.instance; }
  std::string signature() const override { return cfg_.signature; }
  std::vector<Tactic> tactics(const Dims& dims) const override;
  void prepare(const Dims& dims) override;
  void run(int tactic, const Dims& dims) override;
  void release() override { prepared_ = 0; }

  int ideal(int64_t tokens) const;                 // fastest tactic at this bucket
  int expected_best(int64_t tokens) const;         // fastest that works
  int cost_units(int tactic, int64_t tokens) const;
  int64_t output() const { return output_; }
  int runs() const { return runs_; }

 private:
  Config cfg_;
  int64_t prepared_ = 0;
  int64_t output_ = 0;
  int runs_ = 0;
};

}  // namespace dsa::tune
