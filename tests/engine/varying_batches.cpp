#include "varying_batches.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "dsa/kv/kv_manager.h"
#include "engine_models.h"

namespace dsa::engine::test {

VaryingRun run_varying_batches(model::CausalLM& lm, bool graphs, int64_t pad_max, int decode_steps,
                               const std::vector<int>& sizes, bool want_logits) {
  const int64_t V = lm.config().vocab_size;
  const std::vector<int64_t> lengths{120, 9, 3, 17, 5, 30, 11};
  const int n = static_cast<int>(lengths.size());
  kv::KvManagerOptions ko;
  ko.device = lm.device();
  ko.max_requests = 8;
  ko.max_step_tokens = 256;
  ko.max_position = 512;
  ko.num_blocks = 64;
  kv::KvManager kv(lm.kv_requirements(), ko);
  ModelRunner runner(lm, kv);
  runner.set_graphs(graphs);
  runner.set_decode_padding(pad_max);
  std::vector<std::vector<int32_t>> seq = random_prompts(lengths, V, 23);
  std::vector<int64_t> cached(static_cast<size_t>(n), 0);
  for (int i = 0; i < n; ++i) kv.add_request(i);
  VaryingRun out;
  auto step = [&](const std::vector<int>& members) {
    kv::Batch b;
    std::vector<RowRequest> rows;
    for (int i : members) {
      const auto& s = seq[static_cast<size_t>(i)];
      const int64_t c = cached[static_cast<size_t>(i)];
      b.add(i, c, std::vector<int32_t>(s.begin() + c, s.end()));
      RowRequest r;
      r.token = b.num_tokens() - 1;
      r.want_logits = want_logits;
      if (i == 1) {
        r.sampling.temperature = 0.8f;
        r.sampling.top_k = 20;
        r.sampling.seed = 5;
        r.sampling.counter = static_cast<uint64_t>(s.size());
      }
      rows.push_back(r);
    }
    const StepResult res = runner.run(b, rows);
    std::vector<float> lg;
    for (size_t k = 0; k < members.size(); ++k) {
      const int i = members[k];
      const int32_t tok = res.tokens[k];
      EXPECT_GE(tok, 0) << "request " << i << " got no token";
      seq[static_cast<size_t>(i)].push_back(std::max(tok, 0));
      cached[static_cast<size_t>(i)] = static_cast<int64_t>(seq[static_cast<size_t>(i)].size()) - 1;
      if (!want_logits) continue;
      EXPECT_EQ(res.logits_row[k], static_cast<int>(k));
      const float* p = res.logits.data<float>() + static_cast<int64_t>(k) * V;
      for (int64_t v = 0; v < V; ++v) EXPECT_TRUE(std::isfinite(p[v])) << "request " << i << " logit " << v;
      lg.insert(lg.end(), p, p + V);
    }
    out.tokens.push_back(res.tokens);
    out.logits.push_back(std::move(lg));
  };
  std::vector<int> all(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) all[static_cast<size_t>(i)] = i;
  step(all);  // prefill: one mixed step, never padded
  const int64_t shapes0 = runner.step_shapes();
  for (int s = 0; s < decode_steps; ++s) {
    const int k = sizes[static_cast<size_t>(s) % sizes.size()];
    std::vector<int> members;
    for (int j = 0; j < k; ++j) members.push_back((s + j) % n);
    std::sort(members.begin(), members.end());
    step(members);
  }
  out.decode_shapes = runner.step_shapes() - shapes0;
  out.padded_steps = runner.padded_steps();
  if (runner.graphs()) out.graphs = runner.graphs()->stats();
  return out;
}

}  // namespace dsa::engine::test
