#include "dsa/model/common/linear.h"

#include "dsa/core/dtype_conv.h"
#include "dsa/core/error.h"
#include "dsa/formats/fp8_block.h"
#include "dsa/model/common/expert_stack.h"
#include "dsa/ops/tensor/tensor_ops.h"

namespace dsa::model {

namespace {

size_t bytes_of(const Tensor& t) { return t.defined() ? t.nbytes() : 0; }

int64_t blocks(int64_t n) { return (n + 127) / 128; }

}  // namespace

Linear Linear::to(Device dev) const {
  Linear o;
  o.weight = weight.to(dev);
  if (scale.defined()) o.scale = scale.to(dev);
  return o;
}

Linear Linear::rows(int64_t begin, int64_t end) const {
  Linear o;
  o.weight = weight.slice(0, begin, end);
  if (fp8()) {
    DSA_CHECK(begin % 128 == 0, "linear rows [{}, {}): an FP8 part must start on a 128-row scale block", begin, end);
    o.scale = scale.slice(0, begin / 128, blocks(end));
  }
  return o;
}

size_t Linear::nbytes() const { return bytes_of(weight) + bytes_of(scale); }

void Linear::apply(const Tensor& x, Tensor& out) const {
  if (!fp8()) return ops::linear_bf16(x, weight, out);
  if (out.dtype() == DType::BF16) return ops::linear_fp8_block(x, fp8_block(), out);
  Tensor tmp = Tensor::empty(out.shape(), DType::BF16, out.device());
  ops::linear_fp8_block(x, fp8_block(), tmp);
  ops::copy_cast(out, tmp);
}

Tensor Linear::apply(const Tensor& x, DType out) const {
  DSA_CHECK(x.dim() == 2 && x.size(1) == in_features(), "linear: input {} does not match in = {}", x.str(),
            in_features());
  Tensor o = Tensor::empty({x.size(0), out_features()}, out, x.device());
  apply(x, o);
  return o;
}

Tensor block_scales_f32(const Tensor& s) {
  if (s.dtype() == DType::F32) return s;
  DSA_CHECK(s.dtype() == DType::E8M0, "FP8 block scales must be f32 or UE8M0, got {}", s.str());
  const Tensor h = s.to(Device::cpu());
  Tensor out = Tensor::empty(s.shape(), DType::F32);
  const uint8_t* in = h.data<uint8_t>();
  for (int64_t i = 0; i < h.numel(); ++i) out.data<float>()[i] = ue8m0_to_f32(in[i]);
  return out.to(s.device());
}

Linear make_linear(const Tensor& weight, const Tensor& scale, Device dev, const std::string& what) {
  DSA_CHECK(weight.dim() == 2, "{}: a linear weight must be 2-D, got {}", what, weight.str());
  Linear l;
  if (weight.dtype() == DType::E4M3) {
    DSA_CHECK(scale.defined(), "{}: an F8_E4M3 weight needs its block scales", what);
    DSA_CHECK(scale.shape() == formats::fp8_block_scale_shape(weight.size(0), weight.size(1)),
              "{}: block scales {} do not cover weight {} in 128x128 blocks", what, scale.str(), weight.str());
    l.weight = weight.to(dev);
    l.scale = block_scales_f32(scale).to(dev);
    return l;
  }
  DSA_CHECK(weight.dtype() == DType::BF16 || weight.dtype() == DType::F32,
            "{}: a linear weight must be F8_E4M3, BF16 or F32, got {}", what, weight.str());
  l.weight = (weight.dtype() == DType::BF16 ? weight : ops::cast(weight.contiguous(), DType::BF16)).to(dev);
  return l;
}

FusedLinear FusedLinear::of(const std::vector<Linear>& parts, const std::string& what) {
  DSA_CHECK(!parts.empty(), "{}: no projections to fuse", what);
  FusedLinear f;
  const Linear& first = parts.front();
  const int64_t K = first.in_features();
  bool shareable = true;
  for (size_t i = 0; i < parts.size(); ++i) {
    const Linear& p = parts[i];
    DSA_CHECK(p.in_features() == K, "{}: part {} reads {} features, part 0 {}", what, i, p.in_features(), K);
    shareable = shareable && p.weight.dtype() == first.weight.dtype() && p.fp8() == first.fp8() &&
                p.weight.device() == first.weight.device() && p.weight.is_contiguous() &&
                (!p.fp8() || i + 1 == parts.size() || p.out_features() % 128 == 0);
  }
  if (!shareable || parts.size() == 1) {
    f.parts_ = parts;
    return f;
  }
  // One "expert" whose parts are the projections: the same row-after-row copy, scales alike.
  const ops::ExpertWeights one = stack_expert_parts(
      1, static_cast<int>(parts.size()), first.fp8() ? ops::WeightFormat::FP8Block : ops::WeightFormat::BF16,
      [&](int64_t, int i) { return std::pair{parts[static_cast<size_t>(i)].weight, parts[static_cast<size_t>(i)].scale}; },
      first.weight.device(), what);
  f.whole_.weight = one.weight.select(0, 0);
  if (first.fp8()) f.whole_.scale = one.scale.select(0, 0);
  int64_t n = 0;
  for (const Linear& p : parts) {
    f.parts_.push_back(f.whole_.rows(n, n + p.out_features()));
    n += p.out_features();
  }
  return f;
}

size_t FusedLinear::nbytes() const {
  if (fused()) return whole_.nbytes();
  size_t b = 0;
  for (const Linear& p : parts_) b += p.nbytes();
  return b;
}

std::vector<Tensor> FusedLinear::apply(const Tensor& x, DType out) const {
  std::vector<Tensor> outs;
  outs.reserve(parts_.size());
  if (fused() && x.dim() == 2 && x.size(0) == 1) {
    // One token: each part's output is a contiguous piece of the one output row.
    const Tensor all = whole_.apply(x, out);
    int64_t n = 0;
    for (const Linear& p : parts_) {
      outs.push_back(all.slice(1, n, n + p.out_features()));
      n += p.out_features();
    }
    return outs;
  }
  for (const Linear& p : parts_) outs.push_back(p.apply(x, out));
  return outs;
}

}  // namespace dsa::model
