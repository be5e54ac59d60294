// The active tuning: with a table installed, default-tactic calls of the sparse-MLA backend and
// the MoE expert GEMMs get the tuned tactic of their bucket; untuned buckets, shapes no op
// instance was tuned for, and tuned tactics the actual params do not offer get the default;
// clearing and replacing the table take effect at once. The CUDA test runs the backend with a
// non-default tuned tactic and checks the launch used it and still matches the reference.
#include <cmath>
#include <optional>

#include "common/sparse_mla_problem.h"
#include "common/testing.h"
#include "dsa/attention/backends/cpu_reference.h"
#include "dsa/attention/backends/cuda_sparse_mla.h"
#include "dsa/core/device.h"
#include "dsa/ops/tactics/tactic_chooser.h"
#include "dsa/tune/active_tuning.h"

using namespace dsa;
using namespace dsa::tune;

namespace {

// Shape-only params: the chooser reads shapes, never data.
ops::SparseMlaParams shape_params(int64_t T, int64_t H, int64_t keys) {
  static char dummy alignas(16)[16];
  ops::SparseMlaParams p;
  p.q = Tensor::from_blob(dummy, {T, H, 576}, DType::BF16);
  p.main.cache.kind = formats::KvFormat::DsMla;
  p.main.cache.page_size = 64;
  p.main.indices = Tensor::from_blob(dummy, {T, keys}, DType::I32);
  return p;
}

SparseMlaTuneConfig glm_like(int heads, int keys, Device dev) {
  SparseMlaTuneConfig c;
  c.kind = formats::KvFormat::DsMla;
  c.heads = heads;
  c.main_keys = keys;
  c.main_page = 64;
  c.device = dev;
  return c;
}

// An entry as the tuner would record it for tactic `id` of `op` at `bucket`.
TunedEntry entry_for(const TunableOp& op, const Dims& bucket, int id) {
  for (const auto& t : op.tactics(bucket))
    if (t.id == id) {
      TunedEntry e;
      e.tactic = id;
      e.description = t.description;
      e.us = 1;
      return e;
    }
  ADD_FAILURE() << "tactic " << id << " not offered at " << op.key(bucket);
  return {};
}

std::vector<std::unique_ptr<TunableOp>> one_op(std::unique_ptr<TunableOp> op) {
  std::vector<std::unique_ptr<TunableOp>> v;
  v.push_back(std::move(op));
  return v;
}

int index_of(const ops::SparseMlaParams& p, ops::SparseMlaTactic t) {
  auto list = ops::sparse_mla_tactics(p);
  for (size_t i = 0; i < list.size(); ++i)
    if (list[i] == t) return static_cast<int>(i);
  return -1;
}

// Answers fixed tactics, valid or not, to test the ops-side checks.
struct FixedChooser : ops::TacticChooser {
  int mla = -1, gemm = -1;
  std::string describe() const override { return "fixed"; }
  int sparse_mla(const ops::SparseMlaParams&) const override { return mla; }
  int expert_gemm(const ops::ExpertGemmShape&) const override { return gemm; }
};

struct ClearOnExit {
  ~ClearOnExit() { clear_active_tuning(); }
};

}  // namespace

TEST(TuneActive, NoChooserMeansDefaultAndNoRecording) {
  clear_active_tuning();
  ops::reset_tactic_choice_stats();
  EXPECT_EQ(ops::active_tactic_chooser(), nullptr);
  EXPECT_EQ(ops::choose_sparse_mla_tactic(shape_params(4, 64, 2048)), -1);
  EXPECT_EQ(ops::choose_expert_gemm_tactic({}), -1);
  EXPECT_EQ(ops::tactic_choice_stats(ops::TunedFamily::SparseMla).calls, 0u);
  EXPECT_EQ(ops::tactic_choice_stats(ops::TunedFamily::ExpertGemm).calls, 0u);
}

TEST(TuneActive, SparseMlaUsesTheTunedBucketElseTheDefault) {
  ClearOnExit guard;
  ops::reset_tactic_choice_stats();
  auto op = std::make_unique<SparseMlaTunable>(glm_like(64, 2048, Device::cpu()));
  const SparseMlaTunable& o = *op;
  const EngineLimits limits{64, 4};
  TuningTable table;
  table.set(o.name(), o.signature(), o.key({8}), entry_for(o, {8}, 1602));    // h16_s2 at bucket 8
  table.set(o.name(), o.signature(), o.key({64}), entry_for(o, {64}, 3216));  // h32_s16 at the max bucket
  auto chooser = install_active_tuning(one_op(std::move(op)), table, limits, "test");
  EXPECT_EQ(chooser->entries(), 2u);
  EXPECT_NE(chooser->describe().find("2 entries"), std::string::npos) << chooser->describe();

  // T = 5 and 8 fall into bucket 8: the tuned tactic, as the op's index for the actual params.
  for (int64_t T : {5, 8}) {
    auto p = shape_params(T, 64, 2048);
    const int want = index_of(p, {16, 2});
    ASSERT_GE(want, 0);
    EXPECT_EQ(ops::choose_sparse_mla_tactic(p), want) << T;
    EXPECT_EQ(ops::tactic_choice_stats(ops::TunedFamily::SparseMla).last, want);
  }
  // Bucket 2 was not tuned: the default.
  testing::internal::CaptureStderr();
  EXPECT_EQ(ops::choose_sparse_mla_tactic(shape_params(2, 64, 2048)), -1);
  testing::internal::GetCapturedStderr();
  EXPECT_EQ(ops::tactic_choice_stats(ops::TunedFamily::SparseMla).last, -1);
  // T = 4096 clamps to the max bucket 64, whose tactic h32_s16 needs 4096*64*16*2 KB = 8 GiB of
  // split workspace at this T: the op does not offer it, the call gets the default.
  {
    auto big = shape_params(4096, 64, 2048);
    EXPECT_EQ(index_of(big, {32, 16}), -1);
    EXPECT_EQ(ops::choose_sparse_mla_tactic(big), -1);
    EXPECT_EQ(chooser->not_offered(), 1u);
    EXPECT_EQ(index_of(shape_params(64, 64, 2048), {32, 16}), ops::choose_sparse_mla_tactic(shape_params(64, 64, 2048)));
  }
  // Another static shape (1024 keys, 32 heads, or an extra key list): no instance, default.
  testing::internal::CaptureStderr();
  EXPECT_EQ(ops::choose_sparse_mla_tactic(shape_params(8, 64, 1024)), -1);
  EXPECT_EQ(ops::choose_sparse_mla_tactic(shape_params(8, 32, 2048)), -1);
  std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(chooser->unmatched(), 2u);
  EXPECT_NE(err.find("no tuned sparse_mla_decode instance"), std::string::npos) << err;
  const auto st = ops::tactic_choice_stats(ops::TunedFamily::SparseMla);
  EXPECT_EQ(st.calls, 7u);
  EXPECT_EQ(st.tuned, 3u);
  EXPECT_EQ(st.rejected, 0u);
}

TEST(TuneActive, TableIsCopiedClearedAndReplaced) {
  ClearOnExit guard;
  const auto cfg = glm_like(64, 2048, Device::cpu());
  SparseMlaTunable ref(cfg);
  const EngineLimits limits{64, 4};
  auto p = shape_params(8, 64, 2048);
  TuningTable table;
  table.set(ref.name(), ref.signature(), ref.key({8}), entry_for(ref, {8}, 1602));
  install_active_tuning(one_op(std::make_unique<SparseMlaTunable>(cfg)), table, limits);
  EXPECT_EQ(ops::choose_sparse_mla_tactic(p), index_of(p, {16, 2}));
  // The installed chooser holds a copy: changing the source table changes nothing.
  table.set(ref.name(), ref.signature(), ref.key({8}), entry_for(ref, {8}, 3201));
  EXPECT_EQ(ops::choose_sparse_mla_tactic(p), index_of(p, {16, 2}));
  // Installing the changed table replaces the chooser.
  install_active_tuning(one_op(std::make_unique<SparseMlaTunable>(cfg)), table, limits);
  EXPECT_EQ(ops::choose_sparse_mla_tactic(p), index_of(p, {32, 1}));
  // Cleared: the default again.
  clear_active_tuning();
  EXPECT_EQ(ops::active_tactic_chooser(), nullptr);
  EXPECT_EQ(ops::choose_sparse_mla_tactic(p), -1);
  // A table under another tactic-set signature is never used.
  TuningTable stale;
  stale.set(ref.name(), "sparse_mla:old", ref.key({8}), entry_for(ref, {8}, 1602));
  install_active_tuning(one_op(std::make_unique<SparseMlaTunable>(cfg)), stale, limits);
  testing::internal::CaptureStderr();
  EXPECT_EQ(ops::choose_sparse_mla_tactic(p), -1);
  testing::internal::GetCapturedStderr();
}

TEST(TuneActive, ExpertGemmUsesTheTunedTilePerInstance) {
  ClearOnExit guard;
  ops::reset_tactic_choice_stats();
  MoeGemmTuneConfig gu;
  gu.format = ops::WeightFormat::FP8Block;
  gu.experts = 8;
  gu.topk = 2;
  gu.n = 256;
  gu.k = 128;
  gu.fuse_swiglu = true;
  gu.device = Device::cpu();
  MoeGemmTuneConfig down = gu;
  down.n = 128;
  down.k = 128;
  down.fuse_swiglu = false;
  std::vector<std::unique_ptr<TunableOp>> opv;
  opv.push_back(std::make_unique<MoeGemmTunable>(gu));
  opv.push_back(std::make_unique<MoeGemmTunable>(down));
  TuningTable table;
  table.set(opv[0]->name(), opv[0]->signature(), opv[0]->key({4}), entry_for(*opv[0], {4}, 1));  // tile64
  table.set(opv[1]->name(), opv[1]->signature(), opv[1]->key({4}), entry_for(*opv[1], {4}, 2));  // tile16_ksplit
  install_active_tuning(std::move(opv), table, {16, 4});

  ops::ExpertGemmShape s{ops::WeightFormat::FP8Block, 8, 2, 256, 128, true, 64, 3};
  EXPECT_EQ(ops::choose_expert_gemm_tactic(s), 1);
  ops::ExpertGemmShape d{ops::WeightFormat::FP8Block, 8, 2, 128, 128, false, 64, 4};
  EXPECT_EQ(ops::choose_expert_gemm_tactic(d), 2);
  testing::internal::CaptureStderr();
  d.tokens = 16;  // untuned bucket
  EXPECT_EQ(ops::choose_expert_gemm_tactic(d), -1);
  s.format = ops::WeightFormat::MXFP4;  // no such instance
  EXPECT_EQ(ops::choose_expert_gemm_tactic(s), -1);
  s.format = ops::WeightFormat::FP8Block;
  s.alignment = 16;  // no such instance either
  EXPECT_EQ(ops::choose_expert_gemm_tactic(s), -1);
  testing::internal::GetCapturedStderr();
  const auto st = ops::tactic_choice_stats(ops::TunedFamily::ExpertGemm);
  EXPECT_EQ(st.calls, 5u);
  EXPECT_EQ(st.tuned, 2u);
}

TEST(TuneActive, InvalidAnswersOfAChooserBecomeTheDefault) {
  ClearOnExit guard;
  ops::reset_tactic_choice_stats();
  auto c = std::make_shared<FixedChooser>();
  ops::install_tactic_chooser(c);
  auto p = shape_params(8, 64, 2048);
  const int n = static_cast<int>(ops::sparse_mla_tactics(p).size());
  c->mla = n - 1;
  EXPECT_EQ(ops::choose_sparse_mla_tactic(p), n - 1);
  testing::internal::CaptureStderr();
  c->mla = n;  // one past the list
  EXPECT_EQ(ops::choose_sparse_mla_tactic(p), -1);
  c->mla = -7;
  EXPECT_EQ(ops::choose_sparse_mla_tactic(p), -1);
  ops::ExpertGemmShape s;
  s.alignment = 16;
  c->gemm = 1;  // 64-row tiles need 64-aligned segments
  EXPECT_EQ(ops::choose_expert_gemm_tactic(s), -1);
  c->gemm = ops::kExpertGemmTactics;  // one past the last tactic
  EXPECT_EQ(ops::choose_expert_gemm_tactic(s), -1);
  std::string err = testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("is not valid"), std::string::npos) << err;
  c->gemm = 2;
  EXPECT_EQ(ops::choose_expert_gemm_tactic(s), 2);
  EXPECT_EQ(ops::tactic_choice_stats(ops::TunedFamily::SparseMla).rejected, 2u);
  EXPECT_EQ(ops::tactic_choice_stats(ops::TunedFamily::ExpertGemm).rejected, 2u);
  EXPECT_EQ(ops::tactic_choice_stats(ops::TunedFamily::ExpertGemm).last, 2);
}

TEST(TuneActive, ModelOpsOfATinyModelArePaddedToKernelHeadCounts) {
  PlanModel m = load_plan_model("glm-5.1");
  m.attention[0].num_heads = 12;  // the forwards pad 12 heads to 16
  auto ops = make_sparse_mla_tunables(m, {}, 0);
  ASSERT_EQ(ops.size(), 1u);
  EXPECT_EQ(static_cast<SparseMlaTunable&>(*ops[0]).config().heads, 16);
}

TEST(TuneActive, CudaBackendRunsTheInstalledTacticAndMatchesTheReference) {
  DSA_REQUIRE_CUDA();
  ClearOnExit guard;
  ops::reset_tactic_choice_stats();
  test::Rng rng;
  const int T = 5, H = 32;
  const test::SparseMlaProblem pr = test::make_glm_sparse_mla_problem(T, H, rng);
  ops::SparseMlaParams g = test::sparse_mla_on_cuda(pr.p);

  attn::AttentionImplConfig cfg;
  cfg.query.capability = effective_capability(0);
  cfg.query.kv_cache_dtype = attn::KvCacheDtype::Fp8DsMla;
  cfg.query.head_size = 576;
  cfg.query.num_heads = H;
  cfg.query.page_sizes = {64};
  cfg.kind = attn::LayerKind::MlaSparse;
  cfg.topk = 64;
  cfg.softmax_scale = g.softmax_scale;
  attn::CudaSparseMlaBackend backend;
  auto impl = backend.create_impl(cfg);

  // A tuned tactic that differs from the op's default for this shape, so the test can tell.
  const ops::SparseMlaTactic def = ops::sparse_mla_default_tactic(g, cuda_devices().at(0).sm_count);
  std::optional<ops::SparseMlaTactic> other;
  for (const auto& t : ops::sparse_mla_tactics(g))
    if (!(t == def)) other = t;
  ASSERT_TRUE(other.has_value()) << "only one tactic for this shape";
  const ops::SparseMlaTactic pick = *other;
  const int id = sparse_mla_tune_id(pick);

  const auto tcfg = glm_like(H, 64, Device::cuda(0));
  SparseMlaTunable ref(tcfg);
  const EngineLimits limits{8, 1};
  TuningTable table;
  table.set(ref.name(), ref.signature(), ref.key({8}), entry_for(ref, {8}, id));
  install_active_tuning(one_op(std::make_unique<SparseMlaTunable>(tcfg)), table, limits);

  test::poison(g.o);
  test::poison(g.lse);
  impl->forward(g);  // default tactic requested: the table's choice runs
  EXPECT_EQ(ops::sparse_mla_last_launched_tactic(), pick) << "launched " << ops::sparse_mla_last_launched_tactic().name()
                                                          << ", tuned " << pick.name();
  EXPECT_EQ(ops::tactic_choice_stats(ops::TunedFamily::SparseMla).last, index_of(g, pick));
  test::expect_matches_sparse_mla_reference(g, pr);

  // An explicit tactic is never overridden.
  test::poison(g.o);
  test::poison(g.lse);
  impl->forward(g, index_of(g, def));
  EXPECT_EQ(ops::sparse_mla_last_launched_tactic(), def);
  test::expect_matches_sparse_mla_reference(g, pr);

  // Cleared: the op's default again.
  clear_active_tuning();
  test::poison(g.o);
  test::poison(g.lse);
  impl->forward(g);
  EXPECT_EQ(ops::sparse_mla_last_launched_tactic(), def);
  test::expect_matches_sparse_mla_reference(g, pr);
}

TEST(TuneActive, HostTensorsNeverConsultTheChooser) {
  // The CPU reference has one way to compute: the CPU backend runs it whatever is installed.
  ClearOnExit guard;
  ops::reset_tactic_choice_stats();
  auto c = std::make_shared<FixedChooser>();
  c->mla = 1000;  // would be rejected (and counted) if asked
  ops::install_tactic_chooser(c);
  test::Rng rng;
  const test::SparseMlaProblem pr = test::make_glm_sparse_mla_problem(3, 16, rng);
  ops::SparseMlaParams g = pr.p;
  attn::AttentionImplConfig cfg;
  cfg.query.kv_cache_dtype = attn::KvCacheDtype::Fp8DsMla;
  cfg.query.head_size = 576;
  cfg.query.num_heads = 16;
  cfg.query.page_sizes = {64};
  cfg.kind = attn::LayerKind::MlaSparse;
  cfg.topk = 64;
  cfg.softmax_scale = g.softmax_scale;
  attn::CpuReferenceBackend cpu;
  test::poison(g.o);
  test::poison(g.lse);
  cpu.create_impl(cfg)->forward(g);
  EXPECT_EQ(ops::tactic_choice_stats(ops::TunedFamily::SparseMla).calls, 0u);
  test::expect_matches_sparse_mla_reference(g, pr);
}
