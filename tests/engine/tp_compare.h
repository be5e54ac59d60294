// What the tensor-parallel model tests (test_tensor_parallel*.cpp) compare: logits of a Session
// or a TensorParallelSession driven through the same batches, and their distance.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include <gtest/gtest.h>

#include "dsa/core/tensor.h"
#include "dsa/engine/session.h"

namespace dsa::engine::test {

inline Tensor copy_of(const Tensor& t) {
  Tensor c = Tensor::empty(t.shape(), DType::F32);
  c.copy_from(t);
  return c;
}

inline float max_abs(const Tensor& t) {
  float m = 0.f;
  for (int64_t i = 0; i < t.numel(); ++i) m = std::max(m, std::fabs(t.data<float>()[i]));
  return m;
}

inline float max_diff(const Tensor& a, const Tensor& b) {
  EXPECT_EQ(a.shape(), b.shape());
  float m = 0.f;
  for (int64_t i = 0; i < a.numel(); ++i) m = std::max(m, std::fabs(a.data<float>()[i] - b.data<float>()[i]));
  return m;
}

// Two requests in every batch: prefill of both prompts, then `decode` steps of one token each
// (greedy on the reference logits, fed to both sides). Returns each step's logits (copied).
template <typename S>
std::vector<Tensor> drive(S& s, const std::vector<std::vector<int32_t>>& prompts,
                          const std::vector<std::vector<int32_t>>& next) {
  const kv::RequestId a = s.add_request(), b = s.add_request();
  std::vector<Tensor> out;
  ForwardBatch pf = ForwardBatch::of(a, prompts[0]);
  const ForwardBatch pb = ForwardBatch::of(b, prompts[1]);
  pf.token_ids.insert(pf.token_ids.end(), pb.token_ids.begin(), pb.token_ids.end());
  pf.request.insert(pf.request.end(), pb.request.begin(), pb.request.end());
  pf.positions.insert(pf.positions.end(), pb.positions.begin(), pb.positions.end());
  out.push_back(copy_of(s.forward(pf)));  // the runner reuses its logits buffer
  for (size_t step = 0; step < next.size(); ++step) {
    ForwardBatch d{{next[step][0], next[step][1]},
                   {a, b},
                   {static_cast<int64_t>(prompts[0].size() + step), static_cast<int64_t>(prompts[1].size() + step)}};
    out.push_back(copy_of(s.forward(d)));
  }
  return out;
}

}  // namespace dsa::engine::test
