// AttentionImpl::forward: the backends run the sparse-MLA op on their platform, refuse tensors on
// the other one and configurations they were not created for; kernel-image checks in selection.
#include <cmath>
#include <functional>

#include "common/sparse_mla_problem.h"
#include "common/testing.h"
#include "dsa/attention/backends/cpu_reference.h"
#include "dsa/attention/backends/cuda_sparse_mla.h"

using dsa::test::error_of;

using namespace dsa;
using namespace dsa::attn;

namespace {

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
  test::SparseMlaProblem pr = test::make_glm_sparse_mla_problem(3, 16, rng);
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
  test::SparseMlaProblem pr = test::make_glm_sparse_mla_problem(1, 16, rng);
  CudaSparseMlaBackend cuda;
  AttentionImplConfig cfg = glm_config(Capability{9, 0}, 16);
  cfg.query.build_has_cuda = true;
  auto impl = cuda.create_impl(cfg);
  EXPECT_EQ(error_of([&] { impl->forward(pr.p); }), "attention backend cuda_sparse_mla runs on the GPU, but q is on cpu");
}

TEST(AttentionImplForward, CudaBackendMatchesReference) {
  DSA_REQUIRE_CUDA();
  test::Rng rng;
  test::SparseMlaProblem pr = test::make_glm_sparse_mla_problem(5, 32, rng);
  ops::SparseMlaParams g = test::sparse_mla_on_cuda(pr.p);
  CudaSparseMlaBackend cuda;
  auto impl = cuda.create_impl(glm_config(effective_capability(0), 32));
  impl->forward(g);
  test::expect_matches_sparse_mla_reference(g, pr);
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
