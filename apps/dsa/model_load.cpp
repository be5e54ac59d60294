#include "model_load.h"

#include <CLI/CLI.hpp>

#include "dsa/core/error.h"
#include "dsa/core/log.h"
#include "dsa/core/version.h"
#include "dsa/engine/tp_follower.h"
#include "dsa/parallel/tcp_group.h"
#include "dsa/model/config.h"
#include "dsa/model/load_format.h"

namespace dsa::cli {

model::WeightSource LoadFormatArgs::source() const {
  model::WeightSource s;
  s.format = model::parse_load_format(format);
  s.layers = layers;
  return s;
}

void add_load_format_options(CLI::App* cmd, LoadFormatArgs& a) {
  cmd->add_option("--load-format", a.format,
                  "Where the weights come from: auto (default) or safetensors: the checkpoint; dummy: random weights "
                  "filled on the device from the config alone (--model may then be a directory with only "
                  "config.json or a built-in name: deepseek-v4-flash, deepseek-v4-pro, glm-5.1); outputs are "
                  "meaningless");
  cmd->add_option("--layers", a.layers, "With --load-format dummy: only the first N layers (0: all)");
}

void add_dist_options(CLI::App* cmd, DistArgs& a) {
  cmd->add_option("--nnodes", a.nnodes,
                  "Processes the tensor-parallel ranks run in, one rank each (on one machine or several); equal to "
                  "--tensor-parallel-size. Start every process with the same command and its own --node-rank")
      ->capture_default_str();
  cmd->add_option("--node-rank", a.node_rank, "With --nnodes: this process's rank (0 runs the command)")
      ->capture_default_str();
  cmd->add_option("--dist-init-addr", a.init_addr,
                  "With --nnodes: HOST:PORT where rank 0 listens and the other ranks connect (TCP)");
  cmd->add_flag("--enable-expert-parallel", a.expert_parallel,
               "With --tensor-parallel-size N > 1: split the routed experts by expert (each rank holds N-th of "
               "them, whole) instead of giving every rank a slice of every expert");
  cmd->add_option("--dist-timeout", a.timeout_s,
                  "With --nnodes: seconds to wait for every rank at start-up and in each collective")
      ->capture_default_str();
}

namespace {

// What must be equal on every rank of --nnodes (parallel/tcp_group.h refuses a mismatch, naming
// the line): this build and the model as loaded.
std::string fingerprint(const model::ModelConfig& cfg, int tp_size, const model::LoadModelOptions& lo) {
  return fmt::format(
      "dsa version={}\narch={}\nlayers={}\nhidden_size={}\nnum_attention_heads={}\nvocab_size={}\n"
      "n_routed_experts={}\ntensor_parallel_size={}\nload_format={}\nexpert_parallel={}\n",
      kVersion, model::arch_name(cfg.arch), cfg.num_layers, cfg.hidden_size, cfg.num_heads, cfg.vocab_size,
      cfg.n_routed_experts, tp_size, static_cast<int>(lo.weights.format), lo.expert_parallel);
}

}  // namespace

void LoadedModel::serve_rank_steps() {
  const int r = tp->first_local_rank();
  log_info("rank {} of {}: serving rank 0's steps on {}", r, tp->size(), lm().device().str());
  const int64_t steps = engine::run_tp_follower(*tp);
  log_info("rank {} of {}: rank 0 stopped the group after {} steps", r, tp->size(), steps);
}

LoadedModel load_model(const std::string& dir, Device dev, int tp_size, const model::LoadModelOptions& lo_in,
                       int speculative_tokens, const DistArgs& dist) {
  const model::ModelConfig cfg = model::model_config_for_load(dir, lo_in.weights.format, lo_in.weights.layers);
  model::LoadModelOptions lo = lo_in;
  lo.expert_parallel = lo.expert_parallel || dist.expert_parallel;
  DSA_CHECK(!lo.expert_parallel || tp_size > 1,
            "--enable-expert-parallel splits the experts over tensor-parallel ranks: it needs --tensor-parallel-size "
            "above 1");
  engine::check_tensor_parallel_size(cfg, tp_size, lo.expert_parallel);
  engine::check_tensor_parallel_options(tp_size, speculative_tokens, dist.nnodes > 1);
  LoadedModel m;
  DSA_CHECK(dist.nnodes >= 1, "--nnodes must be >= 1, got {}", dist.nnodes);
  if (dist.nnodes > 1 || !dist.init_addr.empty() || dist.node_rank != 0) {
    DSA_CHECK(dist.nnodes == tp_size,
              "--nnodes {} runs one tensor-parallel rank per process: --tensor-parallel-size must equal it (got {})",
              dist.nnodes, tp_size);
    DSA_CHECK(dist.nnodes > 1, "--node-rank / --dist-init-addr need --nnodes above 1");
    DSA_CHECK(dist.node_rank >= 0 && dist.node_rank < dist.nnodes, "--node-rank {} is outside 0..{} (--nnodes {})",
              dist.node_rank, dist.nnodes - 1, dist.nnodes);
    DSA_CHECK(!dist.init_addr.empty(), "--nnodes {} needs --dist-init-addr HOST:PORT (where rank 0 listens)",
              dist.nnodes);
    DSA_CHECK(dist.timeout_s >= 1, "--dist-timeout must be >= 1 second, got {}", dist.timeout_s);
    const parallel::HostPort at = parallel::parse_host_port(dist.init_addr, "--dist-init-addr");
    parallel::TcpGroupOptions go;
    go.startup_timeout = go.timeout = std::chrono::seconds(dist.timeout_s);
    go.fingerprint = fingerprint(cfg, tp_size, lo);
    log_info("rank {} of {}: {} {}:{}", dist.node_rank, dist.nnodes,
             dist.node_rank == 0 ? "listening for the other ranks on" : "joining rank 0 at", at.host, at.port);
    auto comm = parallel::tcp_group_join(dist.node_rank, dist.nnodes, at, go);
    log_info("rank {} of {}: every rank joined; loading this rank's shard on {}", dist.node_rank, dist.nnodes,
             dev.str());
    engine::TpLoadOptions to;
    to.weights = lo.weights;
    to.expert_parallel = lo.expert_parallel;
  to.mtp = lo.mtp;
    m.tp = std::make_unique<engine::TensorParallelModels>(std::move(comm), dir, dev, to);
    return m;
  }
  if (tp_size == 1) {
    m.whole = model::load_causal_lm(dir, dev, lo);
    return m;
  }
  const std::vector<Device> devs = engine::tp_rank_devices(dev, tp_size);
  std::string where;
  for (const Device& d : devs) where += (where.empty() ? "" : ", ") + d.str();
  log_info("tensor parallel size {}: loading {} shards on {}", tp_size, tp_size, where);
  engine::TpLoadOptions to;
  to.weights = lo.weights;
  to.expert_parallel = lo.expert_parallel;
  to.mtp = lo.mtp;
  m.tp = std::make_unique<engine::TensorParallelModels>(dir, tp_size, devs, to);
  return m;
}

}  // namespace dsa::cli
