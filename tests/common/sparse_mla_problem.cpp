#include "common/sparse_mla_problem.h"

#include <cmath>

#include "dsa/core/dtype_conv.h"
#include "dsa/formats/kv_cache_ops.h"

namespace dsa::test {

SparseMlaProblem make_glm_sparse_mla_problem(int T, int H, Rng& rng) {
  const int page = 64, pages = 2, K = 64;
  Tensor cache = Tensor::zeros({static_cast<int64_t>(formats::kv_page_bytes(formats::KvFormat::DsMla, page)) * pages},
                               DType::U8);
  Tensor kv = random_bf16({page * pages, 576}, rng);
  Tensor slots = Tensor::empty({page * pages}, DType::I64);
  for (int i = 0; i < page * pages; ++i) slots.data<int64_t>()[i] = i;
  formats::kv_insert({formats::KvFormat::DsMla, page, cache, kv, slots});
  Tensor idx = Tensor::empty({T, K}, DType::I32);
  for (int64_t i = 0; i < idx.numel(); ++i) idx.data<int32_t>()[i] = static_cast<int32_t>(rng.randint(-1, page * pages + 5));
  SparseMlaProblem pr;
  ops::SparseMlaParams& p = pr.p;
  p.q = random_bf16({T, H, 576}, rng);
  p.main.cache = {ops::KvCacheKind::Fp8DsMla, page, cache};
  p.main.indices = idx;
  p.softmax_scale = 1.0f / std::sqrt(576.0f);
  p.o = Tensor::empty({T, H, 512}, DType::BF16);
  p.lse = Tensor::empty({T, H}, DType::F32);
  poison(p.o);
  poison(p.lse);
  pr.o_ref = Tensor::empty({T, H, 512}, DType::BF16);
  pr.lse_ref = Tensor::empty({T, H}, DType::F32);
  ops::SparseMlaParams r = p;
  r.o = pr.o_ref;
  r.lse = pr.lse_ref;
  ops::sparse_mla_reference(r);
  return pr;
}

ops::SparseMlaParams sparse_mla_on_cuda(const ops::SparseMlaParams& p) {
  ops::SparseMlaParams g = p;
  g.q = p.q.to(Device::cuda());
  g.main.cache.data = p.main.cache.data.to(Device::cuda());
  g.main.indices = p.main.indices.to(Device::cuda());
  g.o = Tensor::empty(p.o.shape(), DType::BF16, Device::cuda());
  g.lse = Tensor::empty(p.lse.shape(), DType::F32, Device::cuda());
  poison(g.o);
  poison(g.lse);
  return g;
}

void expect_matches_sparse_mla_reference(const ops::SparseMlaParams& run, const SparseMlaProblem& pr) {
  const Tensor o = run.o.to(Device::cpu()), lse = run.lse.to(Device::cpu());  // no-op copies on the host
  for (int64_t i = 0; i < o.numel(); ++i) {
    const float a = bf16_bits_to_f32(o.data<uint16_t>()[i]), b = bf16_bits_to_f32(pr.o_ref.data<uint16_t>()[i]);
    ASSERT_FALSE(std::isnan(a)) << i;
    ASSERT_NEAR(a, b, 2e-2f + 2e-2f * std::fabs(b)) << i;
  }
  for (int64_t i = 0; i < lse.numel(); ++i) {
    const float a = lse.data<float>()[i], b = pr.lse_ref.data<float>()[i];
    if (std::isinf(b)) {
      ASSERT_EQ(a, b) << i;
      continue;
    }
    ASSERT_FALSE(std::isnan(a)) << i;
    ASSERT_NEAR(a, b, 1e-3f + 1e-3f * std::fabs(b)) << i;
  }
}

}  // namespace dsa::test
