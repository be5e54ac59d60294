#include "glm5_golden_util.h"

#include <algorithm>
#include <cmath>

#include <gtest/gtest.h>

#include "dsa/engine/session.h"
#include "dsa/model/safetensors.h"

namespace dsa::test {

std::string glm5_golden_path(const std::string& name) {
  return std::string(DSA_TEST_DATA_DIR) + "/golden/glm_moe_dsa/" + name + ".safetensors";
}

Glm5Golden read_glm5_golden(const std::string& name) {
  Glm5Golden g;
  g.path = glm5_golden_path(name);
  auto f = SafetensorsFile::open(g.path);
  Tensor ids = f->tensor("prompt_ids"), top1 = f->tensor("prefill_top1"), dids = f->tensor("decode_ids");
  for (int64_t i = 0; i < ids.numel(); ++i) g.prompt.push_back(static_cast<int32_t>(ids.data<int64_t>()[i]));
  for (int64_t i = 0; i < top1.numel(); ++i) g.prefill_top1.push_back(top1.data<int64_t>()[i]);
  for (int64_t i = 0; i < dids.numel(); ++i) g.decode_ids.push_back(static_cast<int32_t>(dids.data<int64_t>()[i]));
  g.prefill_logits = f->tensor("prefill_logits").contiguous();
  g.decode_logits = f->tensor("decode_logits").contiguous();
  return g;
}

Glm5Run run_glm5_golden(model::CausalLM& lm, const Glm5Golden& g) {
  const int64_t V = lm.config().vocab_size, T = static_cast<int64_t>(g.prompt.size());
  const int64_t N = static_cast<int64_t>(g.decode_ids.size());
  engine::SessionOptions so;
  so.kv_blocks = (T + N) / 64 + 8;
  so.max_step_tokens = std::max<int64_t>(T, 1);
  engine::Session session(lm, so);
  const kv::RequestId id = session.add_request();
  engine::ForwardBatch b;
  for (int64_t t = 0; t < T; ++t) {
    b.token_ids.push_back(g.prompt[t]);
    b.request.push_back(id);
    b.positions.push_back(t);
  }
  Glm5Run r;
  r.prefill = session.forward(b, true).to(Device::cpu()).contiguous();
  EXPECT_EQ(r.prefill.shape(), (Shape{T, V}));
  r.decode = Tensor::empty({std::max<int64_t>(N - 1, 0), V}, DType::F32);
  // Decode: feed transformers' greedy tokens (teacher forcing keeps the rows comparable).
  for (int64_t i = 1; i < N; ++i) {
    engine::ForwardBatch d{{g.decode_ids[i - 1]}, {id}, {T + i - 1}};
    const Tensor row = session.forward(d).to(Device::cpu()).contiguous();
    EXPECT_EQ(row.shape(), (Shape{1, V}));
    r.decode.slice(0, i - 1, i).copy_from(row);
  }
  session.free_request(id);
  return r;
}

void Agreement::add_row(const float* ours, const float* ref, int64_t V, int64_t ref_top1) {
  const int64_t mine = std::max_element(ours, ours + V) - ours;
  ++rows;
  if (mine == ref_top1) ++top1_agree;
  for (int64_t v = 0; v < V; ++v) {
    const double d = std::fabs(static_cast<double>(ours[v]) - ref[v]);
    EXPECT_TRUE(std::isfinite(ours[v])) << "logit " << v;
    max_diff = std::max(max_diff, std::isfinite(d) ? d : INFINITY);
    sum_diff += d;
    diffs.push_back(d);
    ++values;
  }
}

void Agreement::add_top1(const float* ours, int64_t V, int64_t ref_top1) {
  ++rows;
  if (std::max_element(ours, ours + V) - ours == ref_top1) ++top1_agree;
}

double Agreement::quantile(double q) {
  if (diffs.empty()) return 0;
  std::sort(diffs.begin(), diffs.end());
  return diffs[static_cast<size_t>(q * static_cast<double>(diffs.size() - 1))];
}

}  // namespace dsa::test
