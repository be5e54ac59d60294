// TensorParallelModels: one checkpoint loaded as `size` shard models (docs/parallelism.md), rank
// r on devices[r], over an in-process group (parallel/in_process_group.h: ranks are threads,
// collectives go through host memory). What a tensor-parallel Engine (engine.h) or
// TensorParallelSession (tp_session.h) runs. Every rank loads its shard on its own thread; a rank
// that fails stops the others, and its error, naming the rank, is the constructor's. After a
// failed collective the group stays stopped: every later run() fails at once with the cause.
//
// Distributed form (one rank per process, `--nnodes`): this process holds only its own rank's
// shard, over a communicator joining the other processes (parallel/tcp_group.h); the other ranks
// are remote (is_local false). Rank 0's process runs the engine (tp_ranks.h sends each step to
// the others), every other process runs run_tp_follower (tp_follower.h).
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "dsa/engine/communicator_shards.h"
#include "dsa/model/causal_lm.h"
#include "dsa/model/config.h"
#include "dsa/parallel/in_process_group.h"
#include "dsa/parallel/rank_threads.h"

namespace dsa::engine {

struct TpLoadOptions {
  parallel::InProcessOptions group;
  // Checkpoint or dummy weights (model::LoadModelOptions::weights). A dummy load fills the whole
  // model on each rank's host and then shards it, like a checkpoint (no per-rank fill yet).
  model::WeightSource weights;
  bool expert_parallel = false;  // routed experts split by expert (model::LoadModelOptions::expert_parallel)
  bool mtp = false;              // load the MTP layer, sharded as the others (speculative decoding)
};

// Throws dsa::Error naming the value unless `size` can shard the model of `cfg`: >= 1, dividing
// the attention heads; DeepSeek-V4 also o_groups and 128-multiple expert slices
// (model/deepseek_v4/sharding.h). Reads only the config, so a command refuses before any weight
// loads (GLM's own shard checks, such as its 128-multiple intermediate slices, come while loading).
// With expert_parallel, size must also divide n_routed_experts.
void check_tensor_parallel_size(const model::ModelConfig& cfg, int size, bool expert_parallel = false);

// Throws unless the engine options go with `size` ranks: speculative decoding runs with the
// tensor-parallel ranks of one process (the MTP layer sharded as the others), not across
// processes (`distributed`: --nnodes; the draft steps' hand-over is not on the wire yet).
void check_tensor_parallel_options(int size, int speculative_tokens, bool distributed = false);

// The devices of `size` ranks for --device `base`: the CPU for every rank; CUDA: consecutive
// devices from base.index when the machine has that many, else every rank on base.
std::vector<Device> tp_rank_devices(Device base, int size);

class TensorParallelModels {
 public:
  // devices: one per rank, or one for every rank.
  TensorParallelModels(const std::string& dir, int size, const std::vector<Device>& devices,
                       const TpLoadOptions& opt = {});
  // Distributed: this process is rank comm->rank() of comm->size(), on `device`.
  TensorParallelModels(std::unique_ptr<parallel::Communicator> comm, const std::string& dir, Device device,
                       const TpLoadOptions& opt = {});
  ~TensorParallelModels();
  TensorParallelModels(const TensorParallelModels&) = delete;
  TensorParallelModels& operator=(const TensorParallelModels&) = delete;

  int size() const { return static_cast<int>(ranks_.size()); }
  bool distributed() const { return comm_ != nullptr; }
  // Whether rank `rank`'s shard lives in this process (every rank, unless distributed).
  bool is_local(int rank) const;
  int first_local_rank() const { return comm_ ? comm_->rank() : 0; }
  model::CausalLM& model(int rank);  // a local rank's
  Device device(int rank) const;     // a local rank's
  // Runs fn(rank) once per local rank, each on its own persistent thread (rank 0 on the
  // caller's), and waits for all; a rank that throws stops the others and its error is rethrown
  // as "rank R of N: ..." (parallel::RankThreads). Distributed: fn(own rank) on the caller.
  void run(const std::function<void(int rank)>& fn);
  parallel::InProcessGroup& group();               // not distributed
  parallel::Communicator& communicator(int rank);  // a local rank's
  // Payload bytes local rank `rank` has passed to collectives so far.
  uint64_t collective_bytes(int rank);

 private:
  struct Rank {
    std::unique_ptr<CommunicatorShards> shards;
    std::unique_ptr<model::CausalLM> lm;
  };
  std::unique_ptr<parallel::InProcessGroup> group_;    // in-process form
  std::unique_ptr<parallel::RankThreads> threads_;
  std::unique_ptr<parallel::Communicator> comm_;       // distributed form
  std::vector<Rank> ranks_;                            // [size]; only local ranks hold a model
};

}  // namespace dsa::engine
