// AttentionImpl::forward: the backends run the sparse-MLA op on their platform, refuse tensors on
// the other one and configurations they were not created for; kernel-image checks in selection.
#include <cmath>
#include <functional>

#include "common/testing.h"
#include "dsa/attention/backends/cpu_reference.h"
#include "dsa/attention/backends/cuda_sparse_mla.h"
#include "dsa/core/dtype_conv.h"
#include "dsa/formats/kv_cache_ops.h"

using dsa::test::error_of;

using namespace dsa;
using namespace dsa::attn;

namespace {

// A GLM-form problem: T tokens, H heads, a fp8_ds_mla cache of 2 pages of 64 filled through the
// formats insert op, indices with -1 and out-of-range entries.
struct Problem {
  ops::SparseMlaParams p;
  Tensor o_ref, lse_ref;
};

Problem make_problem(int T, int H, test::Rng& rng) {
  const int page = 64, pages = 2, K = 64;
  Problem pr;
  Tensor cache = Tensor::zeros({static_cast<int64_t>(formats::kv_page_bytes(formats::KvFormat::DsMla, page)) * pages},
                               DType::U8);
  Tensor kv = test::random_bf16({page * pages, 576}, rng);
  Tensor slots = Tensor::empty({page * pages}, DType::I64);
  for (int i = 0; i < page * pages; ++i) slots.data<int64_t>()[i] = i;
  formats::kv_insert({formats::KvFormat::DsMla, page, cache, kv, slots});
  Tensor idx = Tensor::empty({T, K}, DType::I32);
  for (int64_t i = 0; i < idx.numel(); ++i) idx.data<int32_t>()[i] = static_cast<int32_t>(rng.randint(-1, page * pages + 5));
  auto& p = pr.p;
  p.q = test::random_bf16({T, H, 576}, rng);
  p.main.cache = {ops::KvCacheKind::Fp8DsMla, page, cache};
  p.main.indices = idx;
  p.softmax_scale = 1.0f / std::sqrt(576.0f);
  p.o = Tensor::empty({T, H, 512}, DType::BF16);
  p.lse = Tensor::empty({T, H}, DType::F32);
  test::poison(p.o);
  test::poison(p.lse);
  pr.o_ref = Tensor::empty({T, H, 512}, DType::BF16);
  pr.lse_ref = Tensor::empty({T, H}, DType::F32);
  ops::SparseMlaParams r = p;
  r.o = pr.o_ref;
  r.lse = pr.lse_ref;
  ops::sparse_mla_reference(r);
  return pr;
}

AttentionImplConfig glm_config(std::optional<Capability> cap, int heads) {
  AttentionImplConfig cfg;
  cfg.query.capability = cap;
  cfg.query.kv_cache_dtype = KvCacheDtype::Fp8DsMla;
  cfg.query.head_size = 576;
  cfg.query.num_heads = heads;
  cfg.query.page_sizes = {64};
  cfg.kind = LayerKind::MlaSparse;
  cfg.topk = 64;
  cfg.softmax_scale = 1.0f / std::sqrt(576.0f);
  return cfg;
}

}  // namespace

TEST(AttentionImplForward, CpuReferenceRunsTheOpAndChecksItsConfig) {
  test::Rng rng;
  Problem pr = make_problem(3, 16, rng);
  CpuReferenceBackend cpu;
  auto impl = cpu.create_impl(glm_config(std::nullopt, 16));
  impl->forward(pr.p);
  const auto* o = pr.p.o.data<uint16_t>();
  const auto* want = pr.o_ref.data<uint16_t>();
  for (int64_t i = 0; i < pr.p.o.numel(); ++i) ASSERT_EQ(o[i], want[i]) << i;
  for (int64_t i = 0; i < pr.p.lse.numel(); ++i) {
    float a = pr.p.lse.data<float>()[i], b = pr.lse_ref.data<float>()[i];
    ASSERT_FALSE(std::isnan(a));
    ASSERT_TRUE(a == b) << i;
  }
  auto other = cpu.create_impl(glm_config(std::nullopt, 32));
  EXPECT_EQ(error_of([&] { other->forward(pr.p); }), "attention backend cpu_reference was created for 32 heads, q has 16");
  Tensor sink = test::random_f32({16}, rng);
  ops::SparseMlaParams with_sink = pr.p;
  with_sink.sink = sink;
  EXPECT_EQ(error_of([&] { impl->forward(with_sink); }),
            "attention backend cpu_reference was created without a sink, but one was given");
}

TEST(AttentionImplForward, CudaBackendRefusesHostTensors) {
  test::Rng rng;
  Problem pr = make_problem(1, 16, rng);
  CudaSparseMlaBackend cuda;
  AttentionImplConfig cfg = glm_config(Capability{9, 0}, 16);
  cfg.query.build_has_cuda = true;
  auto impl = cuda.create_impl(cfg);
  EXPECT_EQ(error_of([&] { impl->forward(pr.p); }), "attention backend cuda_sparse_mla runs on the GPU, but q is on cpu");
}

TEST(AttentionImplForward, CudaBackendMatchesReference) {
  DSA_REQUIRE_CUDA();
  test::Rng rng;
  Problem pr = make_problem(5, 32, rng);
  ops::SparseMlaParams g = pr.p;
  g.q = pr.p.q.to(Device::cuda());
  g.main.cache.data = pr.p.main.cache.data.to(Device::cuda());
  g.main.indices = pr.p.main.indices.to(Device::cuda());
  g.o = Tensor::empty(pr.p.o.shape(), DType::BF16, Device::cuda());
  g.lse = Tensor::empty(pr.p.lse.shape(), DType::F32, Device::cuda());
  test::poison(g.o);
  test::poison(g.lse);
  CudaSparseMlaBackend cuda;
  auto impl = cuda.create_impl(glm_config(effective_capability(0), 32));
  impl->forward(g);
  Tensor o = g.o.to(Device::cpu()), lse = g.lse.to(Device::cpu());
  for (int64_t i = 0; i < o.numel(); ++i) {
    float a = bf16_bits_to_f32(o.data<uint16_t>()[i]), b = bf16_bits_to_f32(pr.o_ref.data<uint16_t>()[i]);
    ASSERT_FALSE(std::isnan(a)) << i;
    ASSERT_NEAR(a, b, 2e-2f + 2e-2f * std::fabs(b)) << i;
  }
  for (int64_t i = 0; i < lse.numel(); ++i) {
    float a = lse.data<float>()[i], b = pr.lse_ref.data<float>()[i];
    if (std::isinf(b)) {
      ASSERT_EQ(a, b) << i;
      continue;
    }
    ASSERT_NEAR(a, b, 1e-3f + 1e-3f * std::fabs(b)) << i;
  }
}

TEST(AttentionSelection, KernelImageMustMatchTheDevice) {
  CudaSparseMlaBackend cuda;
  AttentionQuery q = glm_config(Capability{12, 1}, 64).query;
  q.build_has_cuda = true;
  EXPECT_TRUE(cuda.valid_for(q));  // no image list given: a hypothetical build
  q.build_cuda_archs = std::vector<std::string>{"90a", "120a"};
  auto r = cuda.reasons(q);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0], "this build has no kernel image for sm_121 (built for 90a,120a): rebuild with DSA_CUDA_ARCHS including 121a");
  q.build_cuda_archs = std::vector<std::string>{"120f"};
  EXPECT_TRUE(cuda.valid_for(q));
  q.capability = Capability{8, 9};
  q.build_cuda_archs = std::vector<std::string>{"89"};
  EXPECT_TRUE(cuda.valid_for(q));
  q.capability = Capability{9, 0};
  EXPECT_EQ(cuda.reasons(q).at(0),
            "this build has no kernel image for sm_90 (built for 89): rebuild with DSA_CUDA_ARCHS including 90a");
  q.build_cuda_archs = std::vector<std::string>{"90a"};
  EXPECT_TRUE(cuda.valid_for(q));
}
