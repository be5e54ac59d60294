// Tensor parallelism with one rank per process (tp_models.h's distributed form, tp_ranks.h,
// tp_follower.h): ranks joined over TCP loopback (parallel/tcp_group.h; each rank a thread here
// with its own sockets and its own shard, exactly what separate processes do) give the tokens and
// logprobs of the in-process tensor-parallel engine bit for bit (both sum the ranks' partials in
// f32 in rank order) through continuous batching, chunked prefill and preemption; a rank that
// goes away makes rank 0's engine fail naming it; the rank-step bytes round-trip and malformed
// bytes are refused by name.
#include <cstring>
#include <map>
#include <thread>

#include <gtest/gtest.h>

#include "common/testing.h"
#include "dsa/engine/engine.h"
#include "dsa/engine/rank_step.h"
#include "dsa/engine/tp_follower.h"
#include "dsa/engine/tp_models.h"
#include "dsa/model/load_format.h"
#include "dsa/parallel/tcp_group.h"
#include "engine_models.h"
#include "tp_checkpoint.h"

namespace dsa::engine {
namespace {

using namespace std::chrono_literals;
using ::dsa::test::error_of;

struct EngineRun {
  std::map<kv::RequestId, std::vector<int32_t>> tokens;
  std::map<kv::RequestId, std::vector<float>> logprobs;
  int64_t preemptions = 0;
};

EngineOptions options() {
  EngineOptions o;
  o.max_running = 3;
  o.max_step_tokens = 32;
  o.max_prefill_chunk = 16;
  o.kv_blocks = 3;  // 7 pages of demand (64-token pages): admissions wait and decodes preempt
  o.max_model_len = 128;
  o.log_capacity = false;
  return o;
}

EngineRun generate(Engine& e, const std::vector<std::vector<int32_t>>& prompts) {
  SamplingParams p;
  p.max_tokens = 20;
  p.logprobs = 0;
  p.ignore_eos = true;
  for (const auto& pr : prompts) e.add_request(pr, p);
  EngineRun r;
  while (e.has_unfinished())
    for (const StepOutput& o : e.step()) {
      EXPECT_NE(o.finish, FinishReason::Error) << o.error;
      auto& t = r.tokens[o.id];
      t.insert(t.end(), o.new_tokens.begin(), o.new_tokens.end());
      for (const TokenLogprob& l : o.logprobs) r.logprobs[o.id].push_back(l.logprob);
    }
  r.preemptions = e.num_preemptions();
  return r;
}

int64_t vocab_of(const std::string& dir) {
  return model::model_config_for_load(dir, model::LoadFormat::Auto).vocab_size;
}

parallel::TcpGroupOptions group_options() {
  parallel::TcpGroupOptions o;
  o.startup_timeout = 60s;
  o.timeout = 120s;
  o.fingerprint = "test=tp_processes";
  return o;
}

// Rank 0 on this thread (the engine), ranks 1.. on threads of their own running the follower
// loop; returns rank 0's run, and each follower's error text ("" when it returned) and steps.
struct Distributed {
  EngineRun run;
  std::string lead_error;
  std::vector<std::string> errors;
  std::vector<int64_t> steps;
};
Distributed run_distributed(const std::string& dir, int tp, const std::vector<std::vector<int32_t>>& prompts,
                            const std::function<void(int)>& follower_body = nullptr) {
  parallel::TcpListener l({"127.0.0.1", 0});
  const parallel::HostPort at{"127.0.0.1", l.port()};
  Distributed d;
  d.errors.resize(static_cast<size_t>(tp));
  d.steps.resize(static_cast<size_t>(tp));
  std::vector<std::thread> ts;
  for (int r = 1; r < tp; ++r)
    ts.emplace_back([&, r] {
      try {
        TensorParallelModels m(parallel::tcp_group_join(r, tp, at, group_options()), dir, Device::cpu());
        if (follower_body) return follower_body(r);
        d.steps[static_cast<size_t>(r)] = run_tp_follower(m);
      } catch (const std::exception& e) {
        d.errors[static_cast<size_t>(r)] = e.what();
      }
    });
  try {
    TensorParallelModels m(parallel::tcp_group_join(0, tp, at, group_options(), &l), dir, Device::cpu());
    EXPECT_TRUE(m.distributed());
    EXPECT_FALSE(m.is_local(1));
    Engine e(m, options());
    EXPECT_EQ(e.tensor_parallel_size(), tp);
    d.run = generate(e, prompts);
  } catch (const std::exception& e) {
    d.lead_error = e.what();
  }
  for (auto& t : ts) t.join();
  return d;
}

TEST(TpProcesses, TcpRanksGiveTheInProcessEnginesTokensBitForBit) {
  const std::string& dir = test::tp_checkpoint_dir(true, 128);
  const auto prompts = test::random_prompts({50, 45, 60, 9}, vocab_of(dir), 23);
  for (int tp : {2, 4}) {
    EngineRun want;
    {
      TensorParallelModels models(dir, tp, {Device::cpu()});
      Engine e(models, options());
      want = generate(e, prompts);
    }
    const Distributed got = run_distributed(dir, tp, prompts);
    ASSERT_EQ(got.lead_error, "") << "tp " << tp;
    for (int r = 1; r < tp; ++r) {
      EXPECT_EQ(got.errors[static_cast<size_t>(r)], "") << "tp " << tp << " rank " << r;
      EXPECT_GT(got.steps[static_cast<size_t>(r)], 0) << "tp " << tp << " rank " << r;
    }
    EXPECT_GT(want.preemptions, 0) << "the test must preempt";
    EXPECT_EQ(got.run.preemptions, want.preemptions);
    EXPECT_EQ(got.run.tokens, want.tokens) << "tp " << tp;
    ASSERT_EQ(got.run.logprobs.size(), want.logprobs.size());
    for (const auto& [id, lw] : want.logprobs) {
      const auto& lh = got.run.logprobs.at(id);
      ASSERT_EQ(lh.size(), lw.size());
      for (size_t k = 0; k < lw.size(); ++k)
        EXPECT_EQ(std::memcmp(&lh[k], &lw[k], sizeof(float)), 0) << "tp " << tp << " request " << id << " token " << k;
    }
  }
}

TEST(TpProcesses, ARankThatLeavesAfterLoadingStopsRankZerosEngineNamingIt) {
  const std::string& dir = test::tp_checkpoint_dir(true, 128);
  const auto prompts = test::random_prompts({9}, vocab_of(dir), 23);
  const Distributed got = run_distributed(dir, 2, prompts, [](int) {});  // rank 1 returns: its sockets close
  EXPECT_NE(got.lead_error.find("waiting on rank 1"), std::string::npos) << got.lead_error;
  EXPECT_NE(got.lead_error.find("closed the connection"), std::string::npos) << got.lead_error;
}

TEST(TpProcesses, RankStepBytesRoundTripAndMalformedBytesAreRefused) {
  RankStep s;
  kv::BatchMetadata& m = s.meta;
  m.request_ids = {7, -3};
  m.max_seq_len = 41;
  m.index_len = 256;
  auto i32 = [](std::vector<int32_t> v) {
    Tensor t = Tensor::empty({static_cast<int64_t>(v.size())}, DType::I32);
    std::memcpy(t.raw(), v.data(), v.size() * 4);
    return t;
  };
  m.token_req = i32({0, 0, 1});
  m.positions = i32({39, 40, 2});
  m.query_start = i32({0, 2, 3});
  m.cached_lens = i32({39, 2});
  m.seq_lens = i32({41, 3});
  m.state_slots = i32({1, -1});
  kv::GroupMetadata g;
  g.ratio = 4;
  g.page_size = 64;
  g.window = 0;
  g.num_pages = 9;
  g.block_table = Tensor::empty({2, 3}, DType::I32);
  for (int i = 0; i < 6; ++i) g.block_table.data<int32_t>()[i] = i - 1;
  g.slots = Tensor::empty({3}, DType::I64);
  for (int i = 0; i < 3; ++i) g.slots.data<int64_t>()[i] = (int64_t{1} << 33) + i;
  m.groups.push_back(g);
  RowRequest row;
  row.token = 2;
  row.sampling.temperature = 0.7f;
  row.sampling.seed = 99;
  row.want_logits = true;
  s.rows = {row};
  const std::string bytes = encode_rank_step(s);
  const RankStep back = decode_rank_step(bytes);
  EXPECT_EQ(back.meta.request_ids, m.request_ids);
  EXPECT_EQ(back.meta.max_seq_len, 41);
  EXPECT_EQ(back.meta.index_len, 256);
  EXPECT_FALSE(back.meta.token_ids.defined());
  RankStep copy = s;
  std::vector<Tensor*> a = copy.meta.tensors();
  std::vector<Tensor*> b = const_cast<kv::BatchMetadata&>(back.meta).tensors();
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_EQ(a[i]->defined(), b[i]->defined()) << i;
    if (!a[i]->defined()) continue;
    EXPECT_EQ(a[i]->shape(), b[i]->shape()) << i;
    EXPECT_EQ(a[i]->dtype(), b[i]->dtype()) << i;
    EXPECT_EQ(std::memcmp(a[i]->raw(), b[i]->raw(), a[i]->nbytes()), 0) << i;
  }
  EXPECT_EQ(back.meta.groups[0].ratio, 4);
  EXPECT_EQ(back.meta.groups[0].num_pages, 9);
  ASSERT_EQ(back.rows.size(), 1u);
  EXPECT_EQ(back.rows[0].token, 2);
  EXPECT_EQ(back.rows[0].sampling.seed, 99u);
  EXPECT_TRUE(back.rows[0].want_logits);
  // Every truncation is refused with a message, never read past the end.
  for (size_t n = 0; n < bytes.size(); n += 7)
    EXPECT_NE(error_of([&] { decode_rank_step(bytes.substr(0, n)); }).find("rank step: malformed bytes"),
              std::string::npos)
        << n;
  EXPECT_NE(error_of([&] { decode_rank_step(bytes + "x"); }).find("after the last row"), std::string::npos);
}

}  // namespace
}  // namespace dsa::engine
