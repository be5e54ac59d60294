#include "dsa/engine/tp_models.h"

#include <algorithm>

#include "dsa/core/device.h"
#include "dsa/core/error.h"
#include "dsa/model/common/shard_slices.h"
#include "dsa/model/deepseek_v4/sharding.h"

namespace dsa::engine {

void check_tensor_parallel_size(const model::ModelConfig& cfg, int size, bool expert_parallel) {
  DSA_CHECK(size >= 1, "tensor parallel size (--tensor-parallel-size) must be >= 1, got {}", size);
  if (size == 1) return;
  if (cfg.arch == model::Arch::DeepseekV4) return model::v4::check_tensor_parallel(cfg, size, expert_parallel);
  DSA_CHECK(cfg.arch == model::Arch::GlmMoeDsa,
            "tensor parallel size (--tensor-parallel-size) {}: the {} architecture is not sharded yet; use size 1",
            size, model::arch_name(cfg.arch));
  DSA_CHECK(cfg.num_heads % size == 0,
            "tensor parallel size (--tensor-parallel-size) {} does not divide num_attention_heads ({})", size,
            cfg.num_heads);
  if (expert_parallel) model::check_expert_parallel(cfg.n_routed_experts, size);
}

void check_tensor_parallel_options(int size, int speculative_tokens, bool distributed) {
  DSA_CHECK(size <= 1 || speculative_tokens == 0 || !distributed,
            "--speculative-tokens {} with --nnodes {}: speculative decoding runs with the tensor-parallel ranks of one "
            "process only (the draft steps are not sent between processes yet); use one process or no drafts",
            speculative_tokens, size);
}

std::vector<Device> tp_rank_devices(Device base, int size) {
  DSA_CHECK(size >= 1, "tensor parallel size (--tensor-parallel-size) must be >= 1, got {}", size);
  std::vector<Device> d(static_cast<size_t>(size), base);
  if (base.is_cuda() && base.index >= 0 && base.index + size <= static_cast<int>(cuda_devices().size()))
    for (int r = 0; r < size; ++r) d[static_cast<size_t>(r)] = Device::cuda(base.index + r);
  return d;
}

namespace {
std::unique_ptr<model::CausalLM> load_rank(const std::string& dir, Device dev, model::ShardGroup* shards,
                                           const TpLoadOptions& opt) {
  model::LoadModelOptions lo;
  lo.progress = false;
  lo.shards = shards;
  lo.weights = opt.weights;
  lo.expert_parallel = opt.expert_parallel;
  lo.mtp = opt.mtp;
  return model::load_causal_lm(dir, dev, lo);
}
}  // namespace

TensorParallelModels::TensorParallelModels(const std::string& dir, int size, const std::vector<Device>& devices,
                                           const TpLoadOptions& opt)
    : group_(std::make_unique<parallel::InProcessGroup>(std::max(size, 1), opt.group)),
      threads_(std::make_unique<parallel::RankThreads>(*group_)) {
  check_tensor_parallel_size(model::model_config_for_load(dir, opt.weights.format, opt.weights.layers), size,
                             opt.expert_parallel);
  DSA_CHECK(devices.size() == 1 || devices.size() == static_cast<size_t>(size),
            "tensor parallel: {} devices for {} ranks (give one, or one per rank)", devices.size(), size);
  ranks_.resize(static_cast<size_t>(size));
  run([&](int r) {
    Rank& k = ranks_[static_cast<size_t>(r)];
    k.shards = std::make_unique<CommunicatorShards>(group_->rank(r));
    k.lm = load_rank(dir, devices.size() == 1 ? devices[0] : devices[static_cast<size_t>(r)], k.shards.get(), opt);
  });
}

TensorParallelModels::TensorParallelModels(std::unique_ptr<parallel::Communicator> comm, const std::string& dir,
                                           Device device, const TpLoadOptions& opt)
    : comm_(std::move(comm)) {
  DSA_CHECK(comm_ != nullptr, "tensor parallel: no communicator");
  check_tensor_parallel_size(model::model_config_for_load(dir, opt.weights.format, opt.weights.layers), comm_->size(),
                             opt.expert_parallel);
  ranks_.resize(static_cast<size_t>(comm_->size()));
  Rank& k = ranks_[static_cast<size_t>(comm_->rank())];
  k.shards = std::make_unique<CommunicatorShards>(*comm_);
  k.lm = load_rank(dir, device, k.shards.get(), opt);
}

TensorParallelModels::~TensorParallelModels() = default;

bool TensorParallelModels::is_local(int rank) const {
  return rank >= 0 && rank < size() && ranks_[static_cast<size_t>(rank)].lm != nullptr;
}

model::CausalLM& TensorParallelModels::model(int rank) {
  DSA_CHECK(is_local(rank), "tensor parallel: rank {} of {} is not in this process", rank, size());
  return *ranks_[static_cast<size_t>(rank)].lm;
}

Device TensorParallelModels::device(int rank) const {
  DSA_CHECK(is_local(rank), "tensor parallel: rank {} of {} is not in this process", rank, size());
  return ranks_[static_cast<size_t>(rank)].lm->device();
}

void TensorParallelModels::run(const std::function<void(int rank)>& fn) {
  if (comm_) return fn(comm_->rank());
  threads_->run([&](parallel::Communicator& c) { fn(c.rank()); });
}

parallel::InProcessGroup& TensorParallelModels::group() {
  DSA_CHECK(group_ != nullptr, "tensor parallel: a distributed group has no in-process group");
  return *group_;
}

parallel::Communicator& TensorParallelModels::communicator(int rank) {
  DSA_CHECK(is_local(rank), "tensor parallel: rank {} of {} is not in this process", rank, size());
  return comm_ ? *comm_ : group_->rank(rank);
}

uint64_t TensorParallelModels::collective_bytes(int rank) { return communicator(rank).collective_bytes(); }

}  // namespace dsa::engine
