#include "dsa/model/common/shard_slices.h"

#include <cstring>

#include "dsa/core/error.h"

namespace dsa::model {

Range rank_range(int64_t n, int rank, int size, std::string_view what) {
  DSA_CHECK(size >= 1 && rank >= 0 && rank < size, "tensor parallel: rank {} of size {}", rank, size);
  DSA_CHECK(n % size == 0, "tensor parallel size {} does not divide {} ({})", size, what, n);
  return {n / size * rank, n / size * (rank + 1)};
}

void check_expert_parallel(int64_t experts, int size) {
  DSA_CHECK(size >= 1 && experts % size == 0,
            "--enable-expert-parallel: tensor parallel size {} does not divide n_routed_experts ({})", size, experts);
}

Tensor gather_ranges(const Tensor& t, int64_t dim, const std::vector<Range>& ranges) {
  DSA_CHECK(t.defined() && dim >= 0 && dim < t.dim(), "gather_ranges: dim {} of {}", dim, t.defined() ? t.str() : "undefined");
  const Tensor h = t.to(Device::cpu()).contiguous();
  const Shape& s = h.shape();
  int64_t outer = 1, inner = static_cast<int64_t>(dtype_size(h.dtype()));
  for (int64_t d = 0; d < dim; ++d) outer *= s[static_cast<size_t>(d)];
  for (int64_t d = dim + 1; d < h.dim(); ++d) inner *= s[static_cast<size_t>(d)];
  int64_t total = 0;
  for (const Range& r : ranges) {
    DSA_CHECK(r.begin >= 0 && r.begin < r.end && r.end <= s[static_cast<size_t>(dim)],
              "gather_ranges: range [{}, {}) outside dim {} of {}", r.begin, r.end, dim, t.str());
    total += r.size();
  }
  Shape os = s;
  os[static_cast<size_t>(dim)] = total;
  Tensor out = Tensor::empty(os, h.dtype(), Device::cpu());
  const char* src = static_cast<const char*>(h.raw());
  char* dst = static_cast<char*>(out.raw());
  const int64_t row = s[static_cast<size_t>(dim)] * inner, orow = total * inner;
  for (int64_t o = 0; o < outer; ++o) {
    int64_t at = 0;
    for (const Range& r : ranges) {
      std::memcpy(dst + o * orow + at, src + o * row + r.begin * inner, static_cast<size_t>(r.size() * inner));
      at += r.size() * inner;
    }
  }
  return out.to(t.device());
}

namespace {

// The scale ranges of element ranges cut in blocks of `block` along an extent n.
std::vector<Range> block_ranges(const std::vector<Range>& ranges, int64_t block, int64_t n, std::string_view what) {
  std::vector<Range> out;
  for (size_t i = 0; i < ranges.size(); ++i) {
    const Range& r = ranges[i];
    const bool last_partial = i + 1 == ranges.size() && r.end == n;  // a partial last block may end the extent
    DSA_CHECK(r.begin % block == 0 && (r.end % block == 0 || last_partial),
              "{}: the shard [{}, {}) cuts the {}-wide quantization scale blocks (the split part must be a multiple "
              "of {})", what, r.begin, r.end, block, block);
    out.push_back({r.begin / block, (r.end + block - 1) / block});
  }
  return out;
}

std::vector<Range> scaled(const std::vector<Range>& ranges, int64_t num, int64_t den) {
  std::vector<Range> out;
  for (const Range& r : ranges) out.push_back({r.begin * num / den, r.end * num / den});
  return out;
}

}  // namespace

ops::ExpertWeights expert_rows(const ops::ExpertWeights& w, const std::vector<Range>& ranges, std::string_view what) {
  w.validate("expert_rows");
  ops::ExpertWeights o = w;
  o.weight = gather_ranges(w.weight, 1, ranges);
  if (w.format == ops::WeightFormat::FP8Block) o.scale = gather_ranges(w.scale, 1, block_ranges(ranges, 128, w.n(), what));
  if (w.format == ops::WeightFormat::MXFP4) o.scale = gather_ranges(w.scale, 1, ranges);  // one scale row per row
  return o;
}

ops::ExpertWeights expert_cols(const ops::ExpertWeights& w, const std::vector<Range>& ranges, std::string_view what) {
  w.validate("expert_cols");
  ops::ExpertWeights o = w;
  switch (w.format) {
    case ops::WeightFormat::BF16:
      o.weight = gather_ranges(w.weight, 2, ranges);
      break;
    case ops::WeightFormat::FP8Block:
      o.weight = gather_ranges(w.weight, 2, ranges);
      o.scale = gather_ranges(w.scale, 2, block_ranges(ranges, 128, w.k(), what));
      break;
    case ops::WeightFormat::MXFP4:
      block_ranges(ranges, 32, w.k(), what);
      o.weight = gather_ranges(w.weight, 2, scaled(ranges, 1, 2));  // two e2m1 per byte
      o.scale = gather_ranges(w.scale, 2, scaled(ranges, 1, 32));
      break;
  }
  return o;
}

namespace {

Linear linear_part(const Linear& l, int64_t dim, const std::vector<Range>& ranges, std::string_view what) {
  Linear o;
  o.weight = gather_ranges(l.weight, dim, ranges);
  if (l.fp8()) o.scale = gather_ranges(l.scale, dim, block_ranges(ranges, 128, l.weight.size(dim), what));
  return o;
}

}  // namespace

Linear linear_rows(const Linear& l, const std::vector<Range>& ranges, std::string_view what) {
  return linear_part(l, 0, ranges, what);
}

Linear linear_cols(const Linear& l, const std::vector<Range>& ranges, std::string_view what) {
  return linear_part(l, 1, ranges, what);
}

}  // namespace dsa::model
