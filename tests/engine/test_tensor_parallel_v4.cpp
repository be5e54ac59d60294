// Tensor-parallel DeepSeek-V4 (model/deepseek_v4/sharding.h, docs/parallelism.md): TP = 2 and 4
// over the in-process communicator give the logits of the whole model (TP = 1) within a bound for
// a batch of two requests through prefill and decode steps (across the CSA / HCA compression
// boundaries); every rank returns the same bits; configs that cannot be sharded are refused
// naming the field and its value.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>

#include <gtest/gtest.h>

#include "common/testing.h"
#include "dsa/engine/communicator_shards.h"
#include "dsa/engine/sampler.h"
#include "dsa/engine/tp_session.h"
#include "dsa/model/deepseek_v4/sharding.h"
#include "dsa/model/deepseek_v4/model.h"
#include "dsa/model/deepseek_v4/moe_block.h"
#include "dsa/model/load_format.h"
#include "dsa/ops/tensor/tensor_ops.h"
#include "dsa/parallel/rank_threads.h"
#include "engine_models.h"
#include "tp_checkpoint.h"
#include "tp_compare.h"

namespace dsa::engine {
namespace {

using ::dsa::test::error_of;
using test::drive;
using test::max_abs;
using test::max_diff;

constexpr uint64_t kPromptSeed = 41;

model::LoadModelOptions quiet() {
  model::LoadModelOptions o;
  o.progress = false;
  return o;
}

// ep: expert parallelism (routed experts split by expert over the ranks).
void expect_v4_tp_matches(int tp, Device dev = Device::cpu(), bool ep = false) {
  const std::string& dir = test::tp_v4_checkpoint_dir();
  std::unique_ptr<model::CausalLM> whole = model::load_causal_lm(dir, dev, quiet());
  const int64_t V = whole->config().vocab_size, hidden = whole->config().hidden_size;
  const int layers = whole->config().num_layers;
  std::printf("checkpoint seed %llu, prompt seed %llu, tp %d%s on %s\n",
              static_cast<unsigned long long>(test::kTpCheckpointSeed), static_cast<unsigned long long>(kPromptSeed),
              tp, ep ? " (expert parallel)" : "", dev.str().c_str());
  // 7 and 13 tokens, then 4 decode steps: the CSA layers' entries close at positions 3, 7, 11, 15
  // during prefill and decode alike.
  const auto prompts = test::random_prompts({7, 13}, V, kPromptSeed);
  std::vector<std::vector<int32_t>> next;
  const std::vector<Tensor> ref = test::greedy_reference(*whole, prompts, 4, next);
  TpSessionOptions so;
  so.expert_parallel = ep;
  TensorParallelSession tps(dir, tp, dev, so);
  const std::vector<Tensor> got = drive(tps, prompts, next);
  // The ranks' partial sums of wo_b and of the experts' w2 are rounded to bf16 before the
  // all-reduce (the whole model rounds the full sum once): a few bf16 ulps of the block outputs
  // through 4 layers and the mHC mixing of 4 streams (measured on the CPU: 0.049-0.064 at max
  // |logit| 3.0-3.8, 1.3-2.1 %, TP = 2 and 4 alike; GLM's 1.4-2.0 %; the H200 0.047-0.066).
  test::expect_logits_close(got, ref, V, 0.03f, tp);
  test::expect_ranks_agree(tps, tp);
  // Two all-reduces per layer (attention, MoE) of bf16 [T][hidden], and the vocabulary-parallel
  // head's all-gather of f32 [rows][V / tp] (2 logit rows a step).
  const uint64_t tokens = prompts[0].size() + prompts[1].size() + 2 * next.size(), rows = 2 * (1 + next.size());
  EXPECT_EQ(tps.collective_bytes(0), tokens * static_cast<uint64_t>(layers) * 2 * static_cast<uint64_t>(hidden) * 2 +
                                         rows * static_cast<uint64_t>(V / tp) * 4);
}

TEST(TensorParallelV4, Tp2MatchesTheWholeModel) { expect_v4_tp_matches(2); }
TEST(TensorParallelV4, Tp4MatchesTheWholeModel) { expect_v4_tp_matches(4); }
TEST(TensorParallelV4, Ep2MatchesTheWholeModel) { expect_v4_tp_matches(2, Device::cpu(), true); }
TEST(TensorParallelV4, Ep4MatchesTheWholeModel) { expect_v4_tp_matches(4, Device::cpu(), true); }
TEST(TensorParallelV4, CudaEp2MatchesTheWholeModel) {
  DSA_REQUIRE_CUDA();
  expect_v4_tp_matches(2, Device::cuda(0), true);
}
// On one GPU: every rank on cuda:0, each on its own thread and stream, at the same time.
TEST(TensorParallelV4, CudaTp2MatchesTheWholeModel) {
  DSA_REQUIRE_CUDA();
  expect_v4_tp_matches(2, Device::cuda(0));
}
TEST(TensorParallelV4, CudaTp4MatchesTheWholeModel) {
  DSA_REQUIRE_CUDA();
  expect_v4_tp_matches(4, Device::cuda(0));
}

TEST(TensorParallelV4, Tp1IsTheWholeModelBitForBit) {
  const std::string& dir = test::tp_v4_checkpoint_dir();
  std::unique_ptr<model::CausalLM> whole = model::load_causal_lm(dir, Device::cpu(), quiet());
  const auto prompts = test::random_prompts({5, 9}, whole->config().vocab_size, kPromptSeed);
  Session s(*whole);
  TensorParallelSession tps(dir, 1, Device::cpu());
  const std::vector<std::vector<int32_t>> next{{3, 4}};
  const auto a = drive(s, prompts, next), b = drive(tps, prompts, next);
  for (size_t i = 0; i < a.size(); ++i) EXPECT_EQ(max_diff(a[i], b[i]), 0.f) << "step " << i;
}

TEST(TensorParallelV4, ConfigsThatCannotBeShardedAreRefused) {
  // The stock tiny V4: 4 heads in 2 output groups, expert intermediate size 128. Checked from
  // config.json before a weight loads.
  const std::string& stock = test::tiny_model_dir("deepseek_v4");
  EXPECT_EQ(error_of([&] { TensorParallelSession s(stock, 3, Device::cpu()); }),
            "tensor parallel size (--tensor-parallel-size) 3 does not divide num_attention_heads (4)");
  EXPECT_EQ(error_of([&] { TensorParallelSession s(stock, 4, Device::cpu()); }),
            "tensor parallel size (--tensor-parallel-size) 4 does not divide o_groups (2)");
  EXPECT_EQ(error_of([&] { TensorParallelSession s(stock, 2, Device::cpu()); }),
            "tensor parallel size (--tensor-parallel-size) 2: moe_intermediate_size 128 / 2 = 64 is not a multiple "
            "of 128 (each rank's slice is the K of its experts' down projection)");
  model::ModelConfig c = model::model_config_for_load(test::tp_v4_checkpoint_dir(), model::LoadFormat::Auto);
  EXPECT_NO_THROW(model::v4::check_tensor_parallel(c, 4));
  c.moe_intermediate_size = 640;
  EXPECT_EQ(error_of([&] { model::v4::check_tensor_parallel(c, 3); }),
            "tensor parallel size (--tensor-parallel-size) 3 does not divide num_attention_heads (4)");
  c.num_heads = 6;
  c.o_groups = 6;
  EXPECT_EQ(error_of([&] { model::v4::check_tensor_parallel(c, 3); }),
            "tensor parallel size (--tensor-parallel-size) 3 does not divide moe_intermediate_size (640)");
  EXPECT_EQ(error_of([&] { model::v4::check_tensor_parallel(c, 0); }),
            "tensor parallel size (--tensor-parallel-size) must be >= 1, got 0");
  // Expert parallelism: the size must divide the routed experts too (only then).
  model::ModelConfig e = model::model_config_for_load(test::tp_v4_checkpoint_dir(), model::LoadFormat::Auto);
  e.n_routed_experts = 6;
  EXPECT_NO_THROW(model::v4::check_tensor_parallel(e, 2, true));
  EXPECT_NO_THROW(model::v4::check_tensor_parallel(e, 4, false));
  EXPECT_EQ(error_of([&] { model::v4::check_tensor_parallel(e, 4, true); }),
            "--enable-expert-parallel: tensor parallel size 4 does not divide n_routed_experts (6)");
}

// --load-format dummy: each rank fills the whole model on its host and cuts its shard, as from a
// checkpoint, so 2 ranks of a dummy load are the whole dummy model up to the all-reduce's rounding.
TEST(TensorParallelV4, Tp2DummyWeightsMatchTheWholeDummyModel) {
  const std::string& dir = test::tp_v4_checkpoint_dir();
  model::LoadModelOptions lo = quiet();
  lo.weights.format = model::LoadFormat::Dummy;
  lo.weights.seed = 3;
  auto whole = model::load_causal_lm(dir, Device::cpu(), lo);
  const int64_t V = whole->config().vocab_size;
  const auto prompts = test::random_prompts({6, 9}, V, kPromptSeed);
  const std::vector<std::vector<int32_t>> next{{5, 6}, {7, 8}};
  Session ws(*whole);
  const std::vector<Tensor> ref = drive(ws, prompts, next);
  parallel::InProcessGroup g(2);
  std::vector<std::vector<Tensor>> got(2);
  parallel::run_ranks(g, [&](parallel::Communicator& comm) {
    CommunicatorShards shards(comm);
    model::LoadModelOptions ro = lo;
    ro.shards = &shards;
    auto m = model::load_causal_lm(dir, Device::cpu(), ro);
    Session s(*m);
    got[static_cast<size_t>(comm.rank())] = drive(s, prompts, next);
  });
  for (size_t step = 0; step < ref.size(); ++step) {
    const float scale = max_abs(ref[step]), diff = max_diff(got[0][step], ref[step]);
    std::printf("dummy seed 3, step %zu: max |logit| %.4f, max |tp - whole| %.6f\n", step, scale, diff);
    EXPECT_TRUE(std::isfinite(scale)) << "step " << step;
    EXPECT_LE(diff, 0.03f * std::max(1.f, scale)) << "step " << step;
    EXPECT_EQ(std::memcmp(got[0][step].raw(), got[1][step].raw(), got[0][step].nbytes()), 0) << "step " << step;
  }
}

// The MoE of 2 ranks (hash-routed layer 0 and score-routed layer 2; routed + shared experts,
// MXFP4 / FP8 slices of 256), all-reduced, against the whole model's block on the same input: a
// couple of bf16 ulps of the output, and the same bits on both ranks.
TEST(TensorParallelV4, Tp2MoeBlocksSumToTheWholeBlock) {
  const std::string& dir = test::tp_v4_checkpoint_dir();
  auto whole = model::load_causal_lm(dir, Device::cpu(), quiet());
  auto& wm = dynamic_cast<model::v4::DeepseekV4Model&>(*whole);
  const model::ModelConfig& c = whole->config();
  dsa::test::Rng rng(5);
  const Tensor x = ops::cast(dsa::test::random_f32({3, c.hidden_size}, rng), DType::BF16);
  Tensor ids = Tensor::empty({3}, DType::I32);
  for (int i = 0; i < 3; ++i) ids.data<int32_t>()[i] = 7 + 11 * i;
  for (int layer : {0, 2}) {
    ops::MoeWorkspace ws;
    const Tensor ref = ops::cast(model::v4::moe_forward(wm.weights().layers[layer], c, x, ids, ws), DType::F32);
    parallel::InProcessGroup g(2);
    std::vector<Tensor> outs(2);
    parallel::run_ranks(g, [&](parallel::Communicator& comm) {
      CommunicatorShards shards(comm);
      model::LoadModelOptions lo = quiet();
      lo.shards = &shards;
      auto m = model::load_causal_lm(dir, Device::cpu(), lo);
      auto& vm = dynamic_cast<model::v4::DeepseekV4Model&>(*m);
      ops::MoeWorkspace w2;
      Tensor o = model::v4::moe_forward(vm.weights().layers[layer], c, x, ids, w2);
      comm.all_reduce_sum(o);
      outs[static_cast<size_t>(comm.rank())] = ops::cast(o, DType::F32);
    });
    const float scale = max_abs(ref), diff = max_diff(ref, outs[0]);
    std::printf("input seed 5, layer %d: max |whole| %.4f, max |tp - whole| %.6f\n", layer, scale, diff);
    EXPECT_GT(scale, 0.1f) << "a block that outputs ~0 proves nothing";
    EXPECT_LE(diff, 2.f * scale / 128.f) << "layer " << layer;  // two bf16 ulps at the largest output
    EXPECT_EQ(std::memcmp(outs[0].raw(), outs[1].raw(), outs[0].nbytes()), 0) << "ranks differ";
  }
}

}  // namespace
}  // namespace dsa::engine
