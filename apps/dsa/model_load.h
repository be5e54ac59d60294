// The model a command runs (`dsa generate`, `dsa serve`, `dsa bench decode`): the whole
// checkpoint, or with --tensor-parallel-size N > 1 its N shards (engine/tp_models.h: ranks as
// threads of this process, rank r on device base + r when the machine has them, else all on the
// given device), and the engine over it.
#pragma once
#include <memory>
#include <string>

#include "dsa/engine/engine.h"
#include "dsa/engine/tp_models.h"
#include "dsa/model/causal_lm.h"

namespace CLI {
class App;
}

namespace dsa::cli {

// --load-format auto|safetensors|dummy and --layers N (dummy: only the first N layers), the same
// on every command that loads a model (model/load_format.h).
struct LoadFormatArgs {
  std::string format = "auto";
  int layers = 0;
  model::WeightSource source() const;  // throws naming a bad --load-format
};
void add_load_format_options(CLI::App* cmd, LoadFormatArgs& a);

struct LoadedModel {
  std::unique_ptr<model::CausalLM> whole;
  std::unique_ptr<engine::TensorParallelModels> tp;  // size > 1
  model::CausalLM& lm() { return tp ? tp->model(0) : *whole; }  // rank 0's: its config and device
  int tp_size() const { return tp ? tp->size() : 1; }
  std::unique_ptr<engine::Engine> engine(const engine::EngineOptions& eo) {
    return tp ? std::make_unique<engine::Engine>(*tp, eo) : std::make_unique<engine::Engine>(*whole, eo);
  }
};

// Checks --tensor-parallel-size against config.json (or the built-in config of a dummy load) (and against --speculative-tokens, which the
// sharded model cannot run yet) before any weight loads, then loads.
LoadedModel load_model(const std::string& dir, Device dev, int tp_size, const model::LoadModelOptions& lo,
                       int speculative_tokens = 0);

}  // namespace dsa::cli
