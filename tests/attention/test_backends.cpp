// AttentionBackend contracts and the exact rejection texts the base class produces.
#include <functional>

#include "common/testing.h"
#include "dsa/attention/backend.h"
#include "dsa/attention/backends/cpu_reference.h"
#include "dsa/attention/backends/cuda_sparse_mla.h"
#include "dsa/attention/kv_cache_dtype.h"
#include "dsa/core/error.h"
#include "dsa/formats/kv_layout.h"

using dsa::test::error_of;

using namespace dsa;
using namespace dsa::attn;

namespace {

// A valid GLM-5.1 decode query on an H200 in a CUDA build.
AttentionQuery glm_query() {
  AttentionQuery q;
  q.capability = Capability{9, 0};
  q.build_has_cuda = true;
  q.kv_cache_dtype = KvCacheDtype::Fp8DsMla;
  q.head_size = 576;
  q.v_head_size = 512;
  q.num_heads = 64;
  q.page_sizes = {64};
  q.sink = false;
  return q;
}

// A valid DeepSeek-V4 CSA query (SWA pages of 256, compressed pages of 64).
AttentionQuery v4_query() {
  AttentionQuery q = glm_query();
  q.kv_cache_dtype = KvCacheDtype::Fp8Model1;
  q.head_size = 512;
  q.page_sizes = {256, 64};
  q.sink = true;
  return q;
}

// A dense, non-MLA backend without sink support, to exercise the flags' reasons.
class DenseTestBackend final : public AttentionBackend {
 public:
  std::string_view name() const override { return "dense_test"; }
  std::string_view description() const override { return "test"; }
  bool runs_on_gpu() const override { return true; }
  std::vector<DType> supported_dtypes() const override { return {DType::BF16, DType::F16}; }
  std::vector<KvCacheDtype> supported_kv_cache_dtypes() const override { return {KvCacheDtype::Bf16}; }
  PageSizeRule supported_page_sizes() const override { return PageSizeRule{16, 64, false}; }
  std::vector<int> supported_head_sizes() const override { return {576}; }
  bool is_mla() const override { return false; }
  bool is_sparse() const override { return false; }
  bool supports_sink() const override { return false; }
  bool supports_capability(const Capability& c) const override { return c.major == 9; }
  std::string capability_requirement() const override { return "9.x"; }
  std::optional<std::string> supports_combination(const AttentionQuery& q) const override {
    if (q.num_heads > 32) return "more than 32 heads need two CTAs per token (not implemented)";
    return std::nullopt;
  }
};

}  // namespace

TEST(KvCacheDtype, NamesParseAndLayouts) {
  for (KvCacheDtype d : all_kv_cache_dtypes()) EXPECT_EQ(parse_kv_cache_dtype(kv_cache_dtype_name(d)), d);
  EXPECT_EQ(error_of([] { parse_kv_cache_dtype("fp16"); }),
            "unknown kv-cache dtype 'fp16' (known: auto, fp8, fp8_ds_mla, fp8_model1, bf16)");
  EXPECT_TRUE(is_kv_cache_dtype_alias(KvCacheDtype::Auto));
  EXPECT_TRUE(is_kv_cache_dtype_alias(KvCacheDtype::Fp8));
  EXPECT_FALSE(is_kv_cache_dtype_alias(KvCacheDtype::Fp8Model1));
  EXPECT_EQ(kv_cache_dtype_head_size(KvCacheDtype::Fp8DsMla), 576);
  EXPECT_EQ(kv_cache_dtype_head_size(KvCacheDtype::Fp8Model1), 512);
  EXPECT_EQ(kv_cache_dtype_head_size(KvCacheDtype::Bf16), std::nullopt);
  EXPECT_EQ(kv_cache_dtype_token_bytes(KvCacheDtype::Fp8DsMla, 576), 656u);
  EXPECT_EQ(kv_cache_dtype_token_bytes(KvCacheDtype::Fp8Model1, 512), 584u);
  EXPECT_EQ(kv_cache_dtype_token_bytes(KvCacheDtype::Bf16, 576), 1152u);
  EXPECT_THROW(kv_cache_dtype_token_bytes(KvCacheDtype::Auto, 576), Error);
}

TEST(PageSizeRule, AcceptsAndDescribes) {
  PageSizeRule any;
  EXPECT_TRUE(any.accepts(1));
  EXPECT_TRUE(any.accepts(1000));
  EXPECT_FALSE(any.accepts(0));
  EXPECT_FALSE(any.accepts(-64));
  EXPECT_EQ(any.describe(), "any >= 1");
  PageSizeRule p2{1, 256, true};
  for (int p : {1, 2, 4, 8, 16, 32, 64, 128, 256}) EXPECT_TRUE(p2.accepts(p)) << p;
  for (int p : {0, 3, 48, 96, 384, 512}) EXPECT_FALSE(p2.accepts(p)) << p;
  EXPECT_EQ(p2.describe(), "powers of two 1..256");
  EXPECT_EQ((PageSizeRule{16, 64, false}).describe(), "any 16..64");
}

TEST(AttentionQuery, PlatformAndDescribe) {
  AttentionQuery q = v4_query();
  q.capability = Capability{12, 0};
  EXPECT_EQ(q.platform(), "cuda sm_120");
  EXPECT_EQ(q.describe(),
            "{dtype: bf16, kv_cache_dtype: fp8_model1, head_size: 512, v_head_size: 512, num_heads: 64, "
            "page_sizes: [256, 64], mla: true, sparse: true, sink: true}");
  q.capability.reset();
  EXPECT_EQ(q.platform(), "cpu");
  q.capability = Capability{8, 9};
  EXPECT_EQ(q.platform(), "cuda sm_89");
}

TEST(CpuReferenceBackend, Contract) {
  CpuReferenceBackend b;
  EXPECT_EQ(b.name(), "cpu_reference");
  EXPECT_FALSE(b.runs_on_gpu());
  EXPECT_FALSE(b.requires_cuda_build());
  EXPECT_TRUE(b.is_mla());
  EXPECT_TRUE(b.is_sparse());
  EXPECT_TRUE(b.supports_sink());
  EXPECT_EQ(b.supported_head_counts(), std::nullopt);
  EXPECT_EQ(b.supported_head_sizes(), (std::vector<int>{576, 512}));
  EXPECT_EQ(b.supported_kv_cache_dtypes(), (std::vector<KvCacheDtype>{KvCacheDtype::Fp8DsMla, KvCacheDtype::Fp8Model1}));
  AttentionQuery q = glm_query();
  q.capability.reset();
  q.build_has_cuda = false;  // the CPU backend does not care
  EXPECT_TRUE(b.reasons(q).empty());
  q.num_heads = 7;                // any head count
  q.page_sizes = {1, 3, 1000};    // any page size
  EXPECT_TRUE(b.reasons(q).empty());
  AttentionQuery v = v4_query();
  v.capability.reset();
  EXPECT_TRUE(b.reasons(v).empty());
  v.capability = Capability{9, 0};
  EXPECT_EQ(b.reasons(v), (std::vector<std::string>{"runs only on the CPU platform (selecting for cuda sm_90)"}));
}

TEST(CudaSparseMlaBackend, Contract) {
  CudaSparseMlaBackend b;
  EXPECT_EQ(b.name(), "cuda_sparse_mla");
  EXPECT_TRUE(b.runs_on_gpu());
  EXPECT_TRUE(b.requires_cuda_build());
  EXPECT_TRUE(b.is_mla());
  EXPECT_TRUE(b.is_sparse());
  EXPECT_TRUE(b.supports_sink());
  EXPECT_EQ(b.supported_head_counts(), (std::vector<int>{16, 32, 64, 128}));
  EXPECT_EQ(b.supported_dtypes(), (std::vector<DType>{DType::BF16}));
  struct Cap {
    int major, minor;
    bool ok;
  };
  for (Cap c : {Cap{7, 5, false}, Cap{8, 0, false}, Cap{8, 6, false}, Cap{8, 7, false}, Cap{8, 9, true},
                Cap{9, 0, true}, Cap{10, 0, true}, Cap{10, 3, true}, Cap{11, 0, false}, Cap{12, 0, true},
                Cap{12, 1, true}})
    EXPECT_EQ(b.supports_capability(Capability{c.major, c.minor}), c.ok) << c.major << "." << c.minor;
  for (int h : {16, 32, 64, 128}) {
    AttentionQuery q = glm_query();
    q.num_heads = h;
    EXPECT_TRUE(b.reasons(q).empty()) << h;
  }
  // V4 page sizes in use: SWA 64/256, CSA 64, HCA 2.
  for (std::vector<int> pages : {std::vector<int>{256}, {64}, {256, 64}, {256, 2}, {64, 16}}) {
    AttentionQuery q = v4_query();
    q.page_sizes = pages;
    EXPECT_TRUE(b.reasons(q).empty());
  }
}

TEST(AttentionBackendReasons, ExactTexts) {
  CudaSparseMlaBackend cuda;
  CpuReferenceBackend cpu;
  struct Case {
    const char* what;
    const AttentionBackend* backend;
    std::function<void(AttentionQuery&)> change;
    std::vector<std::string> reasons;
  };
  const std::vector<Case> cases = {
      {"cpu platform", &cuda, [](AttentionQuery& q) { q.capability.reset(); },
       {"needs a CUDA GPU (selecting for the CPU platform)"}},
      {"no cuda build", &cuda, [](AttentionQuery& q) { q.build_has_cuda = false; }, {"dsa built without CUDA"}},
      {"sm_80", &cuda, [](AttentionQuery& q) { q.capability = Capability{8, 0}; },
       {"compute capability 8.0 not supported (needs 8.9, 9.x, 10.x or 12.x: e4m3 conversions and mma.sync)"}},
      {"sm_86 without cuda", &cuda,
       [](AttentionQuery& q) {
         q.capability = Capability{8, 6};
         q.build_has_cuda = false;
       },
       {"dsa built without CUDA", "compute capability 8.6 not supported (needs 8.9, 9.x, 10.x or 12.x: e4m3 conversions and mma.sync)"}},
      {"f32", &cuda, [](AttentionQuery& q) { q.dtype = DType::F32; },
       {"dtype f32 not supported (supported: bf16)"}},
      {"bf16 cache", &cuda, [](AttentionQuery& q) { q.kv_cache_dtype = KvCacheDtype::Bf16; },
       {"kv_cache_dtype bf16 not supported (supported: fp8_ds_mla, fp8_model1)"}},
      {"bf16 cache cpu", &cpu,
       [](AttentionQuery& q) {
         q.capability.reset();
         q.kv_cache_dtype = KvCacheDtype::Bf16;
       },
       {"kv_cache_dtype bf16 not supported (supported: fp8_ds_mla, fp8_model1)"}},
      {"alias", &cuda, [](AttentionQuery& q) { q.kv_cache_dtype = KvCacheDtype::Auto; },
       {"kv_cache_dtype auto is an alias: resolve it against the model first"}},
      {"head 256", &cuda, [](AttentionQuery& q) { q.head_size = 256; },
       {"head_size 256 not supported (supported: 576, 512)",
        "kv_cache_dtype fp8_ds_mla stores d_qk 576 but head_size is 256 (fp8_ds_mla is the GLM-5.1/V3.2 layout; "
        "DeepSeek-V4 layers (d_qk 512) use fp8_model1)"}},
      {"v head 256", &cuda, [](AttentionQuery& q) { q.v_head_size = 256; },
       {"v_head_size 256 not supported (supported: 512)"}},
      {"8 heads", &cuda, [](AttentionQuery& q) { q.num_heads = 8; },
       {"num_heads 8 not supported (supported: 16, 32, 64, 128)"}},
      {"page 512", &cuda, [](AttentionQuery& q) { q.page_sizes = {512}; },
       {"page_size 512 not supported (supported: powers of two 1..256)"}},
      {"pages 48 and 96", &cuda, [](AttentionQuery& q) { q.page_sizes = {48, 64, 96}; },
       {"page_size 48 not supported (supported: powers of two 1..256)",
        "page_size 96 not supported (supported: powers of two 1..256)"}},
      {"no pages", &cuda, [](AttentionQuery& q) { q.page_sizes.clear(); }, {"no page size given"}},
      {"fp8_ds_mla for V4", &cuda,
       [](AttentionQuery& q) {
         q = v4_query();
         q.kv_cache_dtype = KvCacheDtype::Fp8DsMla;
       },
       {"kv_cache_dtype fp8_ds_mla stores d_qk 576 but head_size is 512 (fp8_ds_mla is the GLM-5.1/V3.2 layout; "
        "DeepSeek-V4 layers (d_qk 512) use fp8_model1)"}},
      {"fp8_model1 for GLM", &cpu,
       [](AttentionQuery& q) {
         q.capability.reset();
         q.kv_cache_dtype = KvCacheDtype::Fp8Model1;
       },
       {"kv_cache_dtype fp8_model1 stores d_qk 512 but head_size is 576 (fp8_model1 is the DeepSeek-V4 layout; "
        "GLM-5.1/V3.2 layers (d_qk 576) use fp8_ds_mla)"}},
  };
  for (const auto& c : cases) {
    AttentionQuery q = glm_query();
    c.change(q);
    EXPECT_EQ(c.backend->reasons(q), c.reasons) << c.what;
    EXPECT_FALSE(c.backend->valid_for(q)) << c.what;
  }
}

TEST(AttentionBackendReasons, FlagsAndCombination) {
  DenseTestBackend b;
  AttentionQuery q = glm_query();
  q.kv_cache_dtype = KvCacheDtype::Bf16;
  q.page_sizes = {32};
  q.num_heads = 32;
  q.mla = true;
  q.sparse = true;
  q.sink = true;
  EXPECT_EQ(b.reasons(q),
            (std::vector<std::string>{"MLA not supported", "sparse attention not supported", "attention sink not supported"}));
  q.mla = q.sparse = q.sink = false;
  EXPECT_TRUE(b.reasons(q).empty());
  q.num_heads = 64;
  EXPECT_EQ(b.reasons(q), (std::vector<std::string>{"more than 32 heads need two CTAs per token (not implemented)"}));
  q.page_sizes = {8};
  q.capability = Capability{12, 0};
  q.dtype = DType::F32;
  EXPECT_EQ(b.reasons(q), (std::vector<std::string>{
                              "compute capability 12.0 not supported (needs 9.x)",
                              "dtype f32 not supported (supported: bf16, f16)",
                              "page_size 8 not supported (supported: any 16..64)",
                              "more than 32 heads need two CTAs per token (not implemented)",
                          }));
}

TEST(AttentionBackendKvCache, ShapesAndPageBytes) {
  CudaSparseMlaBackend cuda;
  CpuReferenceBackend cpu;
  for (const AttentionBackend* b : {static_cast<const AttentionBackend*>(&cuda), static_cast<const AttentionBackend*>(&cpu)}) {
    KvCacheShape s = b->kv_cache_shape(10, 64, KvCacheDtype::Fp8DsMla, 576);
    EXPECT_EQ(s.dims, (std::vector<int64_t>{10, 64, 656}));
    EXPECT_EQ(s.dtype, DType::U8);
    EXPECT_EQ(s.page_bytes, 64u * 656u);
    EXPECT_EQ(s.total_bytes(), 10u * 64u * 656u);
    // MODEL1: [P x 576][P x 8] padded to a multiple of 576 bytes.
    struct P {
      int page;
      size_t bytes;
    };
    for (P p : {P{256, 149760}, P{64, 37440}, P{2, 1728}, P{1, 1152}}) {
      EXPECT_EQ(b->page_bytes(p.page, KvCacheDtype::Fp8Model1, 512), p.bytes) << p.page;
      EXPECT_EQ(p.bytes % 576, 0u);
      EXPECT_GE(p.bytes, static_cast<size_t>(p.page) * 584);
      EXPECT_EQ(p.bytes, kv::model1::page_bytes(p.page));
      KvCacheShape m = b->kv_cache_shape(3, p.page, KvCacheDtype::Fp8Model1, 512);
      EXPECT_EQ(m.dims, (std::vector<int64_t>{3, static_cast<int64_t>(p.bytes)}));
    }
  }
  EXPECT_EQ(error_of([&] { cuda.kv_cache_shape(1, 512, KvCacheDtype::Fp8DsMla, 576); }),
            "cuda_sparse_mla: page_size 512 not supported (supported: powers of two 1..256)");
  EXPECT_EQ(error_of([&] { cuda.kv_cache_shape(1, 64, KvCacheDtype::Bf16, 576); }),
            "cuda_sparse_mla: kv_cache_dtype bf16 not supported");
  EXPECT_EQ(error_of([&] { cuda.kv_cache_shape(1, 64, KvCacheDtype::Fp8, 576); }),
            "cuda_sparse_mla: kv_cache_dtype fp8 is an alias: resolve it against the model first");
  EXPECT_EQ(error_of([&] { cuda.kv_cache_shape(-1, 64, KvCacheDtype::Fp8DsMla, 576); }),
            "kv_cache_shape: num_pages -1 must be >= 0");
  DenseTestBackend dense;
  KvCacheShape d = dense.kv_cache_shape(4, 16, KvCacheDtype::Bf16, 576);
  EXPECT_EQ(d.dims, (std::vector<int64_t>{4, 16, 576}));
  EXPECT_EQ(d.dtype, DType::BF16);
  EXPECT_EQ(d.page_bytes, 16u * 576u * 2u);
}

TEST(AttentionBackendFactory, RecordsBackendAndConfigOrThrows) {
  CudaSparseMlaBackend cuda;
  AttentionImplConfig cfg;
  cfg.query = v4_query();
  cfg.kind = LayerKind::Csa;
  cfg.topk = 512;
  cfg.window = 128;
  cfg.softmax_scale = 0.044194173f;
  auto impl = cuda.create_impl(cfg);
  ASSERT_NE(impl, nullptr);
  EXPECT_EQ(&impl->backend(), &cuda);
  EXPECT_EQ(impl->config().kind, LayerKind::Csa);
  EXPECT_EQ(impl->config().topk, 512);
  EXPECT_EQ(impl->config().query.page_sizes, (std::vector<int>{256, 64}));

  cfg.query.capability = Capability{8, 0};
  EXPECT_EQ(error_of([&] { cuda.create_impl(cfg); }),
            "attention backend cuda_sparse_mla cannot serve cuda sm_80 with {dtype: bf16, kv_cache_dtype: fp8_model1, "
            "head_size: 512, v_head_size: 512, num_heads: 64, page_sizes: [256, 64], mla: true, sparse: true, "
            "sink: true}: [compute capability 8.0 not supported (needs 8.9, 9.x, 10.x or 12.x: e4m3 conversions and mma.sync)]");
  cfg.query = v4_query();
  cfg.softmax_scale = 0.f;
  EXPECT_EQ(error_of([&] { cuda.create_impl(cfg); }), "AttentionImplConfig.softmax_scale 0 must be > 0");
  cfg.softmax_scale = 1.f;
  cfg.topk = -1;
  EXPECT_EQ(error_of([&] { cuda.create_impl(cfg); }), "AttentionImplConfig.topk -1 must be >= 0");
}
