// The CUDA forward of GLM (every step on the device: embedding, absorbed MLA products, residual
// adds) against the CPU forward on the tiny FP8 checkpoint, with the absorbed matrices in f32 (as
// on the CPU) and in bf16 (the CUDA default).
//
// Only positions below index_topk are compared: there the indexer keeps every key, so nothing
// but rounding separates the devices (past it the tiny model is chaotic, see
// test_glm5_golden.cpp; the golden tests judge those rows). Prefill of index_topk - 1 tokens and
// one decode step, so both the decode (T = 1) and the prefill shapes run.
//
// Tolerance: the devices differ by bf16-level rounding of the activations (sums in another
// order), which the FP8 latent cache can amplify to an e4m3 step (6 %) on a few elements; the
// bounds below are relative to the logits' own spread and far under what a wrong head, a missed
// token or an unwritten buffer gives (O(1) of that spread). The measured numbers are printed.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

#include "common/testing.h"
#include "dsa/model/glm5/model.h"
#include "glm5_test_util.h"

using namespace dsa;

namespace {

// Logits [topk][V] of prefill(ids[0 .. topk-2]) then decode(ids[topk-1]).
Tensor run(model::glm5::Model& m, const std::vector<int32_t>& ids) {
  const int64_t n = static_cast<int64_t>(ids.size()), V = m.config().vocab_size;
  const int id = m.add_request();
  model::ForwardBatch pre;
  for (int64_t t = 0; t + 1 < n; ++t) {
    pre.token_ids.push_back(ids[t]);
    pre.request.push_back(id);
    pre.positions.push_back(t);
  }
  const Tensor a = m.forward(pre, true);
  const Tensor b = m.forward(model::ForwardBatch{{ids[n - 1]}, {id}, {n - 1}});
  m.free_request(id);
  Tensor out = Tensor::empty({n, V}, DType::F32);
  out.slice(0, 0, n - 1).copy_from(a);
  out.slice(0, n - 1, n).copy_from(b);
  return out;
}

}  // namespace

TEST(Glm5Cuda, ForwardMatchesCpuWhereIndexerHasNoChoice) {
  DSA_REQUIRE_CUDA();
  model::glm5::Model cpu(test::glm5_tiny_dir(), Device::cpu());
  const int64_t topk = cpu.config().index_topk, V = cpu.config().vocab_size;
  ASSERT_GE(topk, 2);
  test::Rng rng;
  std::vector<int32_t> ids;
  for (int64_t t = 0; t < topk; ++t) ids.push_back(static_cast<int32_t>(rng.randint(0, V - 1)));
  const Tensor ref = run(cpu, ids);

  double spread = 0;  // mean |logit - row mean| of the CPU logits
  for (int64_t t = 0; t < topk; ++t) {
    const float* r = ref.data<float>() + t * V;
    double mean = 0;
    for (int64_t v = 0; v < V; ++v) mean += r[v];
    mean /= static_cast<double>(V);
    for (int64_t v = 0; v < V; ++v) spread += std::fabs(r[v] - mean);
  }
  spread /= static_cast<double>(topk * V);
  ASSERT_GT(spread, 0.0);

  for (DType absorbed : {DType::F32, DType::BF16}) {
    model::glm5::Options o;
    o.absorbed_dtype = absorbed;
    model::glm5::Model gpu(test::glm5_tiny_dir(), Device::cuda(0), o);
    const Tensor got = run(gpu, ids);
    double max_diff = 0, sum_diff = 0;
    int top1 = 0;
    for (int64_t t = 0; t < topk; ++t) {
      const float* g = got.data<float>() + t * V;
      const float* r = ref.data<float>() + t * V;
      for (int64_t v = 0; v < V; ++v) {
        ASSERT_TRUE(std::isfinite(g[v])) << "row " << t << " logit " << v;
        const double d = std::fabs(static_cast<double>(g[v]) - r[v]);
        max_diff = std::max(max_diff, d);
        sum_diff += d;
      }
      top1 += std::max_element(g, g + V) - g == std::max_element(r, r + V) - r;
    }
    const double mean_diff = sum_diff / static_cast<double>(topk * V);
    std::printf("[glm5 cuda vs cpu, w_uk/w_uv %s] %lld rows: top-1 %d/%lld, |diff| max %.5f mean %.6f (logit "
                "spread %.4f)\n",
                std::string(dtype_name(absorbed)).c_str(), static_cast<long long>(topk), top1,
                static_cast<long long>(topk), max_diff, mean_diff, spread);
    EXPECT_LT(mean_diff, 0.03 * spread) << dtype_name(absorbed);
    EXPECT_LT(max_diff, 0.5 * spread + 0.1) << dtype_name(absorbed);
    EXPECT_GE(top1, topk - 1) << dtype_name(absorbed);
  }
}
