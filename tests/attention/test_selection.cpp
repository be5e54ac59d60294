// Registry, priority lists and selection: every target capability x model x layer type, the
// forced-backend path (flag and DSA_ATTENTION_BACKEND) and the exact user-facing error texts.
#include <cstdlib>
#include <functional>

#include <fmt/format.h>

#include "common/testing.h"
#include "dsa/attention/backends/cpu_reference.h"
#include "dsa/attention/plan.h"
#include "dsa/attention/priority.h"
#include "dsa/attention/registry.h"
#include "dsa/attention/selector.h"
#include "dsa/core/error.h"
#include "dsa/model/config.h"

using dsa::test::error_of;

using namespace dsa;
using namespace dsa::attn;

namespace {

AttentionBackendRegistry& builtins() {
  static AttentionBackendRegistry r = [] {
    AttentionBackendRegistry x;
    register_builtin_attention_backends(x);
    return x;
  }();
  return r;
}

// Sets an environment variable for the scope of a test and restores it.
class EnvGuard {
 public:
  EnvGuard(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value)
      setenv(name, value, 1);
    else
      unsetenv(name);
  }
  ~EnvGuard() {
    if (old_)
      setenv(name_, old_->c_str(), 1);
    else
      unsetenv(name_);
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

SelectOptions no_env() {
  SelectOptions o;
  o.read_env = false;
  o.log = false;
  return o;
}

std::optional<Capability> cap_of(const std::string& s) {
  if (s == "none") return std::nullopt;
  return Capability::parse(s);
}

}  // namespace

TEST(AttentionRegistry, ExplicitRegistration) {
  AttentionBackendRegistry r;
  EXPECT_TRUE(r.empty());
  register_builtin_attention_backends(r);
  EXPECT_EQ(r.names(), (std::vector<std::string>{"cpu_reference", "cuda_sparse_mla"}));
  register_builtin_attention_backends(r);  // idempotent
  EXPECT_EQ(r.names().size(), 2u);
  EXPECT_NE(r.find("cuda_sparse_mla"), nullptr);
  EXPECT_EQ(r.find("flashmla"), nullptr);
  EXPECT_EQ(error_of([&] { r.add(std::make_unique<CpuReferenceBackend>()); }),
            "attention backend 'cpu_reference' is already registered");
  register_builtin_attention_backends();
  register_builtin_attention_backends();
  EXPECT_EQ(attention_backend_registry().names(), (std::vector<std::string>{"cpu_reference", "cuda_sparse_mla"}));
}

TEST(AttentionPriority, EveryTargetHasARowOfRegisteredBackends) {
  struct Row {
    const char* cap;
    std::vector<std::string> expect;
  };
  for (const Row& r : {Row{"none", {"cpu_reference"}}, Row{"8.0", {"cuda_sparse_mla"}}, Row{"8.6", {"cuda_sparse_mla"}},
                       Row{"8.9", {"cuda_sparse_mla"}}, Row{"9.0", {"cuda_sparse_mla"}},
                       Row{"10.0", {"cuda_sparse_mla"}}, Row{"12.0", {"cuda_sparse_mla"}},
                       Row{"12.1", {"cuda_sparse_mla"}}, Row{"7.5", {"cuda_sparse_mla"}}})
    EXPECT_EQ(attention_backend_priority(cap_of(r.cap)), r.expect) << r.cap;
  for (const auto& row : attention_priority_table()) {
    EXPECT_FALSE(row.backends.empty()) << row.platform;
    for (const auto& n : row.backends) EXPECT_NE(builtins().find(n), nullptr) << row.platform << ": " << n;
  }
}

// Capability x model x layer type, in CUDA and CPU-only builds.
TEST(AttentionSelection, CapabilityModelLayerTable) {
  struct Expect {
    const char* cap;
    bool cuda_build;
    const char* backend;  // nullptr: nothing fits
    std::vector<std::string> reasons;  // of cuda_sparse_mla / cpu_reference when nothing fits
  };
  const std::string sm80 = "compute capability 8.0 not supported (needs 8.9, 9.x, 10.x or 12.x: e4m3 conversions and mma.sync)";
  const std::vector<Expect> table = {
      {"none", true, "cpu_reference", {}},
      {"none", false, "cpu_reference", {}},
      {"8.0", true, nullptr, {sm80}},
      {"8.0", false, nullptr, {"dsa built without CUDA", sm80}},
      {"8.9", true, "cuda_sparse_mla", {}},
      {"9.0", true, "cuda_sparse_mla", {}},
      {"10.0", true, "cuda_sparse_mla", {}},
      {"12.0", true, "cuda_sparse_mla", {}},
      {"12.1", true, "cuda_sparse_mla", {}},
      {"8.9", false, nullptr, {"dsa built without CUDA"}},
      {"9.0", false, nullptr, {"dsa built without CUDA"}},
      {"10.0", false, nullptr, {"dsa built without CUDA"}},
      {"12.0", false, nullptr, {"dsa built without CUDA"}},
      {"12.1", false, nullptr, {"dsa built without CUDA"}},
  };
  struct ModelExpect {
    const char* model;
    std::vector<std::string> kinds;
    std::vector<std::vector<int>> pages;  // kernel page sizes per layer type at the default block size
    int block;
  };
  const std::vector<ModelExpect> models = {
      {"deepseek-v4-flash", {"sliding", "csa", "hca"}, {{256}, {256, 64}, {256, 2}}, 256},
      {"deepseek-v4-pro", {"sliding", "csa", "hca"}, {{256}, {256, 64}, {256, 2}}, 256},
      {"glm-5.1", {"mla_sparse"}, {{64}}, 64},
  };
  for (const auto& m : models) {
    auto config = model::builtin_model_config(m.model);
    for (const auto& e : table) {
      SCOPED_TRACE(fmt::format("{} on {} ({} build)", m.model, e.cap, e.cuda_build ? "CUDA" : "CPU-only"));
      PlanOptions opt;
      opt.capability = cap_of(e.cap);
      opt.build_has_cuda = e.cuda_build;
      opt.block_size = m.block;
      opt.select = no_env();
      auto plans = plan_attention(config.attention_layers(), opt, builtins());
      ASSERT_EQ(plans.size(), m.kinds.size());
      for (size_t i = 0; i < plans.size(); ++i) {
        const auto& p = plans[i];
        EXPECT_EQ(layer_kind_name(p.spec.kind), m.kinds[i]);
        EXPECT_EQ(p.query.page_sizes, m.pages[i]);
        EXPECT_EQ(p.query.kv_cache_dtype,
                  config.arch == model::Arch::DeepseekV4 ? KvCacheDtype::Fp8Model1 : KvCacheDtype::Fp8DsMla);
        EXPECT_TRUE(p.selection.other_valid.empty());
        if (e.backend) {
          ASSERT_NE(p.selection.backend, nullptr) << p.selection.error;
          EXPECT_EQ(p.selection.backend->name(), e.backend);
          EXPECT_TRUE(p.selection.rejected.empty());
          EXPECT_TRUE(p.selection.error.empty());
          EXPECT_EQ(p.caches.size(), p.spec.caches.size());
        } else {
          EXPECT_EQ(p.selection.backend, nullptr);
          ASSERT_EQ(p.selection.rejected.size(), 1u);
          EXPECT_EQ(p.selection.rejected[0].backend, "cuda_sparse_mla");
          EXPECT_EQ(p.selection.rejected[0].reasons, e.reasons);
          EXPECT_TRUE(p.caches.empty());
          EXPECT_EQ(p.selection.error,
                    fmt::format("No valid attention backend for {} with {}. Reasons: {{cuda_sparse_mla: [{}]}}",
                                p.query.platform(), p.query.describe(), fmt::join(e.reasons, ", ")));
        }
      }
    }
  }
}

TEST(AttentionSelection, NoValidBackendErrorTextExact) {
  AttentionQuery q;
  q.capability = Capability{12, 0};
  q.build_has_cuda = false;
  q.kv_cache_dtype = KvCacheDtype::Fp8DsMla;
  q.head_size = 576;
  q.num_heads = 64;
  q.page_sizes = {64};
  EXPECT_EQ(error_of([&] { select_attention_backend(q, no_env(), builtins()); }),
            "No valid attention backend for cuda sm_120 with {dtype: bf16, kv_cache_dtype: fp8_ds_mla, head_size: 576, "
            "v_head_size: 512, num_heads: 64, page_sizes: [64], mla: true, sparse: true, sink: false}. Reasons: "
            "{cuda_sparse_mla: [dsa built without CUDA]}");
  // Every candidate is listed with its reasons (here an explicit candidate list of both).
  SelectOptions o = no_env();
  o.candidates = {"cuda_sparse_mla", "cpu_reference"};
  q.kv_cache_dtype = KvCacheDtype::Bf16;
  EXPECT_EQ(error_of([&] { select_attention_backend(q, o, builtins()); }),
            "No valid attention backend for cuda sm_120 with {dtype: bf16, kv_cache_dtype: bf16, head_size: 576, "
            "v_head_size: 512, num_heads: 64, page_sizes: [64], mla: true, sparse: true, sink: false}. Reasons: "
            "{cuda_sparse_mla: [dsa built without CUDA, kv_cache_dtype bf16 not supported (supported: fp8_ds_mla, "
            "fp8_model1)], cpu_reference: [runs only on the CPU platform (selecting for cuda sm_120), kv_cache_dtype "
            "bf16 not supported (supported: fp8_ds_mla, fp8_model1)]}");
}

TEST(AttentionSelection, FirstValidWinsOthersReported) {
  AttentionQuery q;
  q.capability.reset();
  q.page_sizes = {64};
  SelectOptions o = no_env();
  o.candidates = {"cuda_sparse_mla", "missing_backend", "cpu_reference"};
  Selection s = select_attention_backend(q, o, builtins());
  ASSERT_NE(s.backend, nullptr);
  EXPECT_EQ(s.backend->name(), "cpu_reference");
  ASSERT_EQ(s.rejected.size(), 2u);
  EXPECT_EQ(s.rejected[0].backend, "cuda_sparse_mla");
  EXPECT_EQ(s.rejected[0].reasons[0], "needs a CUDA GPU (selecting for the CPU platform)");
  EXPECT_EQ(s.rejected[1].backend, "missing_backend");
  EXPECT_EQ(s.rejected[1].reasons, (std::vector<std::string>{"not registered"}));

  // Two valid candidates: the first wins, the second is reported as also valid.
  AttentionBackendRegistry two;
  register_builtin_attention_backends(two);
  struct Second final : public AttentionBackend {
    std::string_view name() const override { return "cpu_second"; }
    std::string_view description() const override { return "test"; }
    bool runs_on_gpu() const override { return false; }
    std::vector<DType> supported_dtypes() const override { return {DType::BF16}; }
    std::vector<KvCacheDtype> supported_kv_cache_dtypes() const override { return {KvCacheDtype::Fp8DsMla}; }
    PageSizeRule supported_page_sizes() const override { return {}; }
    std::vector<int> supported_head_sizes() const override { return {576}; }
    bool is_mla() const override { return true; }
    bool is_sparse() const override { return true; }
    bool supports_sink() const override { return false; }
    bool supports_capability(const Capability&) const override { return false; }
    std::string capability_requirement() const override { return "cpu"; }
  };
  two.add(std::make_unique<Second>());
  o.candidates = {"cpu_reference", "cpu_second"};
  s = select_attention_backend(q, o, two);
  EXPECT_EQ(s.backend->name(), "cpu_reference");
  ASSERT_EQ(s.other_valid.size(), 1u);
  EXPECT_EQ(s.other_valid[0]->name(), "cpu_second");
  q.sink = true;  // cpu_second cannot: rejected, not "other valid"
  s = select_attention_backend(q, o, two);
  EXPECT_TRUE(s.other_valid.empty());
  ASSERT_EQ(s.rejected.size(), 1u);
  EXPECT_EQ(s.rejected[0].reasons, (std::vector<std::string>{"attention sink not supported"}));
}

TEST(AttentionSelection, ForcedBackendIsValidatedAlone) {
  AttentionQuery q;
  q.capability = Capability{9, 0};
  q.build_has_cuda = true;
  q.kv_cache_dtype = KvCacheDtype::Fp8Model1;
  q.head_size = 512;
  q.page_sizes = {256, 2};
  q.sink = true;
  SelectOptions o = no_env();
  o.forced = "cuda_sparse_mla";
  Selection s = select_attention_backend(q, o, builtins());
  EXPECT_EQ(s.backend->name(), "cuda_sparse_mla");
  EXPECT_TRUE(s.forced);
  EXPECT_EQ(s.forced_source, "--attention-backend");
  EXPECT_TRUE(s.other_valid.empty());

  o.forced = "cpu_reference";
  EXPECT_EQ(error_of([&] { select_attention_backend(q, o, builtins()); }),
            "Attention backend cpu_reference (forced by --attention-backend) is not valid for cuda sm_90 with {dtype: "
            "bf16, kv_cache_dtype: fp8_model1, head_size: 512, v_head_size: 512, num_heads: 64, page_sizes: [256, 2], "
            "mla: true, sparse: true, sink: true}. Reasons: [runs only on the CPU platform (selecting for cuda sm_90)]");
  o.forced = "flashmla";
  EXPECT_EQ(error_of([&] { select_attention_backend(q, o, builtins()); }),
            "Unknown attention backend 'flashmla' (from --attention-backend). Known backends: cpu_reference, "
            "cuda_sparse_mla");
  // Forced on the CPU platform.
  q.capability.reset();
  o.forced = "cuda_sparse_mla";
  Selection bad = evaluate_attention_backends(q, o, builtins());
  EXPECT_EQ(bad.backend, nullptr);
  EXPECT_TRUE(bad.forced);
  ASSERT_EQ(bad.rejected.size(), 1u);
  EXPECT_EQ(bad.rejected[0].reasons, (std::vector<std::string>{"needs a CUDA GPU (selecting for the CPU platform)"}));
}

TEST(AttentionSelection, ForcedFromEnvironment) {
  AttentionQuery q;
  q.capability = Capability{12, 0};
  q.build_has_cuda = true;
  q.page_sizes = {64};
  SelectOptions o;
  o.log = false;
  {
    EnvGuard env("DSA_ATTENTION_BACKEND", "cpu_reference");
    Selection s = evaluate_attention_backends(q, o, builtins());
    EXPECT_TRUE(s.forced);
    EXPECT_EQ(s.forced_source, "DSA_ATTENTION_BACKEND");
    EXPECT_EQ(s.backend, nullptr);
    EXPECT_EQ(s.error.rfind("Attention backend cpu_reference (forced by DSA_ATTENTION_BACKEND) is not valid for "
                            "cuda sm_120",
                            0),
              0u)
        << s.error;
    // An explicit --attention-backend wins over the environment.
    SelectOptions flag = o;
    flag.forced = "cuda_sparse_mla";
    EXPECT_EQ(select_attention_backend(q, flag, builtins()).backend->name(), "cuda_sparse_mla");
    // read_env = false ignores it.
    EXPECT_EQ(select_attention_backend(q, no_env(), builtins()).backend->name(), "cuda_sparse_mla");
  }
  {
    EnvGuard env("DSA_ATTENTION_BACKEND", "nope");
    EXPECT_EQ(error_of([&] { evaluate_attention_backends(q, o, builtins()); }),
              "Unknown attention backend 'nope' (from DSA_ATTENTION_BACKEND). Known backends: cpu_reference, "
              "cuda_sparse_mla");
  }
  {
    EnvGuard env("DSA_ATTENTION_BACKEND", "");
    EXPECT_FALSE(evaluate_attention_backends(q, o, builtins()).forced);
  }
}

TEST(AttentionSelection, EmptyRegistry) {
  AttentionBackendRegistry empty;
  AttentionQuery q;
  q.page_sizes = {64};
  EXPECT_EQ(error_of([&] { evaluate_attention_backends(q, no_env(), empty); }),
            "no attention backends are registered: call dsa::attn::register_builtin_attention_backends() first");
}

TEST(AttentionPlan, KvCacheDtypeRequests) {
  auto v4 = model::builtin_model_config("deepseek-v4-flash").attention_layers();
  auto glm = model::builtin_model_config("glm-5.1").attention_layers();
  EXPECT_EQ(resolve_kv_cache_dtype(KvCacheDtype::Auto, v4[0]), KvCacheDtype::Fp8Model1);
  EXPECT_EQ(resolve_kv_cache_dtype(KvCacheDtype::Fp8, v4[0]), KvCacheDtype::Fp8Model1);
  EXPECT_EQ(resolve_kv_cache_dtype(KvCacheDtype::Fp8, glm[0]), KvCacheDtype::Fp8DsMla);
  EXPECT_EQ(resolve_kv_cache_dtype(KvCacheDtype::Bf16, glm[0]), KvCacheDtype::Bf16);

  PlanOptions opt;
  opt.capability = Capability{12, 0};
  opt.build_has_cuda = true;
  opt.block_size = 256;
  opt.select = no_env();
  opt.kv_cache_dtype = KvCacheDtype::Fp8DsMla;  // the GLM layout for a V4 model
  for (const auto& p : plan_attention(v4, opt, builtins())) {
    EXPECT_EQ(p.selection.backend, nullptr);
    ASSERT_EQ(p.selection.rejected.size(), 1u);
    EXPECT_EQ(p.selection.rejected[0].reasons,
              (std::vector<std::string>{"kv_cache_dtype fp8_ds_mla stores d_qk 576 but head_size is 512 (fp8_ds_mla "
                                        "is the GLM-5.1/V3.2 layout; DeepSeek-V4 layers (d_qk 512) use fp8_model1)"}));
  }
  opt.kv_cache_dtype = KvCacheDtype::Bf16;  // a valid request no backend serves yet
  opt.block_size = 64;
  for (const auto& p : plan_attention(glm, opt, builtins())) {
    EXPECT_EQ(p.selection.backend, nullptr);
    EXPECT_EQ(p.selection.rejected[0].reasons,
              (std::vector<std::string>{"kv_cache_dtype bf16 not supported (supported: fp8_ds_mla, fp8_model1)"}));
  }
  opt.kv_cache_dtype = KvCacheDtype::Fp8;
  for (const auto& p : plan_attention(glm, opt, builtins())) EXPECT_NE(p.selection.backend, nullptr);
}

TEST(AttentionPlan, BlockSizesAndCacheBytes) {
  auto v4 = model::builtin_model_config("deepseek-v4-flash").attention_layers();
  PlanOptions opt;
  opt.capability = Capability{9, 0};
  opt.build_has_cuda = true;
  opt.select = no_env();
  opt.block_size = 64;  // does not hold whole HCA entries
  EXPECT_EQ(error_of([&] { plan_attention(v4, opt, builtins()); }),
            "block_size 64 does not hold whole hca compressed entries (one per 128 tokens): use a multiple of 128");
  opt.block_size = 0;
  EXPECT_EQ(error_of([&] { plan_attention(v4, opt, builtins()); }), "block_size 0 must be > 0");

  opt.block_size = 256;
  auto plans = plan_attention(v4, opt, builtins());
  ASSERT_EQ(plans.size(), 3u);
  // sliding: SWA pages of 256 (149760 B), at most 2 live pages per request, nothing per context token.
  ASSERT_EQ(plans[0].caches.size(), 1u);
  EXPECT_EQ(plans[0].caches[0].page_size, 256);
  EXPECT_EQ(plans[0].caches[0].page_bytes, 149760u);
  EXPECT_EQ(plans[0].caches[0].max_live_pages, 2);
  EXPECT_DOUBLE_EQ(plans[0].bytes_per_token, 0.0);
  // csa: compressed pages of 64 entries (37440 B) = 146.25 B/token, indexer 64 x 132 B = 33 B/token.
  ASSERT_EQ(plans[1].caches.size(), 3u);
  EXPECT_EQ(plans[1].caches[1].page_size, 64);
  EXPECT_EQ(plans[1].caches[1].page_bytes, 37440u);
  EXPECT_DOUBLE_EQ(plans[1].caches[1].bytes_per_token, 146.25);
  EXPECT_EQ(plans[1].caches[2].layout, "indexer_fp8");
  EXPECT_EQ(plans[1].caches[2].page_size, 64);
  EXPECT_EQ(plans[1].caches[2].page_bytes, 64u * 132u);
  EXPECT_DOUBLE_EQ(plans[1].caches[2].bytes_per_token, 33.0);
  EXPECT_DOUBLE_EQ(plans[1].bytes_per_token, 179.25);
  // hca: compressed pages of 2 entries padded to 1728 B = 864 B/entry = 6.75 B/token.
  EXPECT_EQ(plans[2].caches[1].page_size, 2);
  EXPECT_EQ(plans[2].caches[1].page_bytes, 1728u);
  EXPECT_DOUBLE_EQ(plans[2].bytes_per_token, 6.75);

  // 512-token blocks: SWA pages of 512 exceed the CUDA kernel's range, fine on the CPU.
  opt.block_size = 512;
  for (const auto& p : plan_attention(v4, opt, builtins())) {
    ASSERT_EQ(p.selection.backend, nullptr);
    EXPECT_EQ(p.selection.rejected[0].reasons[0], "page_size 512 not supported (supported: powers of two 1..256)");
  }
  opt.capability.reset();
  for (const auto& p : plan_attention(v4, opt, builtins())) EXPECT_NE(p.selection.backend, nullptr);

  // 128-token blocks: SWA 128 (2 live pages), CSA 32, HCA 1.
  opt.capability = Capability{12, 0};
  opt.block_size = 128;
  plans = plan_attention(v4, opt, builtins());
  EXPECT_EQ(plans[0].caches[0].max_live_pages, 2);
  EXPECT_EQ(plans[1].query.page_sizes, (std::vector<int>{128, 32}));
  EXPECT_EQ(plans[2].query.page_sizes, (std::vector<int>{128, 1}));

  // GLM: latent 656 B/token + indexer 132 B/token per layer.
  auto glm = model::builtin_model_config("glm-5.1").attention_layers();
  opt.block_size = 64;
  plans = plan_attention(glm, opt, builtins());
  ASSERT_EQ(plans[0].caches.size(), 2u);
  EXPECT_EQ(plans[0].caches[0].layout, "fp8_ds_mla");
  EXPECT_EQ(plans[0].caches[0].page_bytes, 64u * 656u);
  EXPECT_EQ(plans[0].caches[0].page_shape, (std::vector<int64_t>{1, 64, 656}));
  EXPECT_DOUBLE_EQ(plans[0].bytes_per_token, 788.0);
}
