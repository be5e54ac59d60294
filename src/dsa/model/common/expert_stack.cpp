#include "dsa/model/common/expert_stack.h"

#include <vector>

#include "dsa/core/error.h"

namespace dsa::model {

ops::ExpertWeights stack_expert_parts(int64_t experts, int parts, ops::WeightFormat fmt, const ExpertPart& part,
                                      Device dev, const std::string& what) {
  DSA_CHECK(experts >= 1 && parts >= 1, "{}: nothing to stack ({} experts, {} parts)", what, experts, parts);
  const bool scaled = fmt != ops::WeightFormat::BF16;
  // Expert 0 fixes every part's shapes; the stack's rows are their sum.
  std::vector<std::pair<Tensor, Tensor>> first;
  int64_t rows = 0, scale_rows = 0;
  for (int i = 0; i < parts; ++i) {
    first.push_back(part(0, i));
    const auto& [w, s] = first.back();
    DSA_CHECK(w.defined() && w.dim() == 2, "{}: expert 0 part {}: weight must be 2-D, got {}", what, i,
              w.defined() ? w.str() : "undefined");
    DSA_CHECK(scaled == s.defined(), "{}: expert 0 part {}: a {} weight {} a scale", what, i,
              ops::weight_format_name(fmt), scaled ? "needs" : "has no");
    if (scaled) DSA_CHECK(s.dim() == 2, "{}: expert 0 part {}: scale must be 2-D, got {}", what, i, s.str());
    DSA_CHECK(w.size(1) == first[0].first.size(1) && w.dtype() == first[0].first.dtype(),
              "{}: expert 0 part {} is {}, part 0 {}: the parts must share K and dtype", what, i, w.str(),
              first[0].first.str());
    DSA_CHECK(fmt != ops::WeightFormat::FP8Block || i + 1 == parts || w.size(0) % 128 == 0,
              "{}: part {} has {} rows, not whole 128-row scale blocks, so the parts cannot share one scale grid",
              what, i, w.size(0));
    rows += w.size(0);
    if (scaled) scale_rows += s.size(0);
  }
  const Tensor& w0 = first[0].first;
  ops::ExpertWeights out;
  out.format = fmt;
  out.weight = Tensor::empty({experts, rows, w0.size(1)}, w0.dtype(), dev);
  if (scaled) out.scale = Tensor::empty({experts, scale_rows, first[0].second.size(1)}, first[0].second.dtype(), dev);
  for (int64_t e = 0; e < experts; ++e) {
    int64_t r = 0, sr = 0;
    for (int i = 0; i < parts; ++i) {
      const auto [w, s] = e == 0 ? first[static_cast<size_t>(i)] : part(e, i);
      const auto& [w_ref, s_ref] = first[static_cast<size_t>(i)];
      DSA_CHECK(w.defined() && w.shape() == w_ref.shape() && w.dtype() == w_ref.dtype(),
                "{}: expert {} part {} weight is {}, expert 0's {}: one stack needs one format and shape", what, e,
                i, w.defined() ? w.str() : "undefined", w_ref.str());
      out.weight.select(0, e).slice(0, r, r + w.size(0)).copy_from(w);
      r += w.size(0);
      if (!scaled) continue;
      DSA_CHECK(s.defined() && s.shape() == s_ref.shape() && s.dtype() == s_ref.dtype(),
                "{}: expert {} part {} scale is {}, expert 0's {}", what, e, i, s.defined() ? s.str() : "undefined",
                s_ref.str());
      out.scale.select(0, e).slice(0, sr, sr + s.size(0)).copy_from(s);
      sr += s.size(0);
    }
  }
  return out;
}

}  // namespace dsa::model
