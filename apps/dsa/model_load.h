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

// Several processes (--nnodes N, one tensor-parallel rank each, on one machine or several):
// --node-rank R says which, --dist-init-addr HOST:PORT where rank 0 listens (parallel/tcp_group.h;
// the others connect there). Every process is started with the same command line apart from
// --node-rank; rank 0 runs the command (its scheduler, tokenizer and server), the others serve its
// steps (engine/tp_follower.h).
struct DistArgs {
  int nnodes = 1;
  int node_rank = 0;
  std::string init_addr;
  int timeout_s = 600;  // start-up and per-collective bound
  // --enable-expert-parallel: with --tensor-parallel-size N > 1, split the routed experts by
  // expert across the ranks (docs/parallelism.md); not a multi-process option, but every command
  // that takes the ones above takes it.
  bool expert_parallel = false;
};
void add_dist_options(CLI::App* cmd, DistArgs& a);

struct LoadedModel {
  std::unique_ptr<model::CausalLM> whole;
  std::unique_ptr<engine::TensorParallelModels> tp;  // size > 1
  // This process's model: the whole one, or its rank's shard (rank 0's, but for a process of a
  // rank above 0 under --nnodes): its config and device.
  model::CausalLM& lm() { return tp ? tp->model(tp->first_local_rank()) : *whole; }
  int tp_size() const { return tp ? tp->size() : 1; }
  // A process of --nnodes that is not rank 0: it runs serve_rank_steps() instead of the command.
  bool follower() const { return tp && tp->first_local_rank() > 0; }
  void serve_rank_steps();
  std::unique_ptr<engine::Engine> engine(const engine::EngineOptions& eo) {
    return tp ? std::make_unique<engine::Engine>(*tp, eo) : std::make_unique<engine::Engine>(*whole, eo);
  }
};

// Checks --tensor-parallel-size against config.json (or the built-in config of a dummy load) (and against --speculative-tokens, which the
// sharded model cannot run yet) before any weight loads, then loads.
LoadedModel load_model(const std::string& dir, Device dev, int tp_size, const model::LoadModelOptions& lo,
                       int speculative_tokens = 0, const DistArgs& dist = {});

}  // namespace dsa::cli
