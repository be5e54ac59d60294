#include "dsa/model/weight_forms.h"

#include <algorithm>

#include "dsa/core/dtype_conv.h"
#include "dsa/core/error.h"
#include "dsa/formats/fp8_block.h"
#include "dsa/formats/mxfp4.h"

namespace dsa {

using schema::LinearKind;
using schema::LinearSpec;
using schema::LinearUse;
using schema::WeightSpec;

namespace {

const Tensor* find(const TensorSet& set, const std::string& name) {
  auto it = set.tensors.find(name);
  return it == set.tensors.end() ? nullptr : &it->second;
}

// The form a checkpoint stores linear `base` in, read from its tensors.
LinearKind stored_form(const TensorSet& set, const std::string& base) {
  if (find(set, base + ".scale")) {
    const Tensor* w = find(set, base + ".weight");
    const bool packed = w && (w->dtype() == DType::I8 || w->dtype() == DType::U8 || w->dtype() == DType::FP4X2);
    return packed ? LinearKind::Mxfp4 : LinearKind::Fp8Ue8m0;
  }
  if (find(set, base + ".weight_scale_inv")) return LinearKind::Fp8F32Inv;
  return LinearKind::Bf16;
}

// The specs add_linear lists for `l` in form `kind` (same accepted forms and use).
std::vector<WeightSpec> linear_specs(const LinearSpec& l, LinearKind kind) {
  std::vector<WeightSpec> v;
  schema::add_linear(v, l.base, l.out, l.in, kind, l.forms, l.use);
  return v;
}

// Exact widening of an F32 / BF16 / F16 host tensor to F32.
Tensor widen_to_f32(const Tensor& t) {
  const Tensor src = t.to(Device::cpu()).contiguous();
  if (src.dtype() == DType::F32) return src;
  Tensor out = Tensor::empty(src.shape(), DType::F32);
  float* o = out.data<float>();
  const uint16_t* s = src.data<uint16_t>();
  if (src.dtype() == DType::BF16) {
    for (int64_t i = 0; i < src.numel(); ++i) o[i] = bf16_bits_to_f32(s[i]);
  } else {
    DSA_CHECK(src.dtype() == DType::F16, "widen_to_f32: unexpected dtype {}", dtype_name(src.dtype()));
    for (int64_t i = 0; i < src.numel(); ++i) o[i] = f16_bits_to_f32(s[i]);
  }
  return out;
}

// bf16 [out][in] of a quantized linear (e4m3 + block scales, or MXFP4).
Tensor dequantize_to_bf16(const LinearSpec& l, LinearKind kind, const Tensor& weight, const Tensor& scale) {
  Tensor out = Tensor::empty({l.out, l.in}, DType::BF16);
  if (kind == LinearKind::Mxfp4) {
    formats::Mxfp4DequantParams p;
    p.packed = weight.to(Device::cpu()).contiguous();
    p.scale = scale.to(Device::cpu()).contiguous();
    p.out = out;
    formats::mxfp4_dequantize_cpu(p);
  } else {
    formats::Fp8BlockDequantParams p;
    p.weight = weight.to(Device::cpu()).contiguous();
    p.scale = scale.to(Device::cpu()).contiguous();
    p.out = out;
    formats::fp8_block_dequantize_cpu(p);
  }
  return out;
}

std::string scale_name(const LinearSpec& l, LinearKind kind) {
  return l.base + (kind == LinearKind::Fp8F32Inv ? ".weight_scale_inv" : ".scale");
}

}  // namespace

std::vector<WeightSpec> resolve_linear_forms(const TensorSet& set, const std::vector<WeightSpec>& specs) {
  std::vector<WeightSpec> out;
  out.reserve(specs.size());
  for (size_t i = 0; i < specs.size(); ++i) {
    const WeightSpec& s = specs[i];
    if (!s.linear) {
      out.push_back(s);
      continue;
    }
    const LinearSpec& l = *s.linear;
    const LinearKind stored = stored_form(set, l.base);
    const bool accepted = std::find(l.forms.begin(), l.forms.end(), stored) != l.forms.end();
    if (stored == l.kind || !accepted) {
      out.push_back(s);
      continue;
    }
    if (l.kind != LinearKind::Bf16) ++i;  // the listed form's scale spec follows its weight
    for (auto& r : linear_specs(l, stored)) out.push_back(std::move(r));
  }
  return out;
}

std::vector<WeightSpec> convert_for_model(TensorSet& set, const std::vector<WeightSpec>& specs) {
  std::vector<WeightSpec> out;
  out.reserve(specs.size());
  for (size_t i = 0; i < specs.size(); ++i) {
    const WeightSpec& s = specs[i];
    auto it = set.tensors.find(s.name);
    if (it == set.tensors.end()) {  // non-strict load: left out
      out.push_back(s);
      continue;
    }
    if (s.any_float && !s.reads(it->second.dtype()) && s.accepts(it->second.dtype())) {
      DSA_CHECK(s.reads(DType::F32), "weight spec {}: any_float needs F32 among the dtypes read (spec bug)", s.name);
      set.origin[s.name] += fmt::format(" ({} widened to f32)", dtype_name(it->second.dtype()));
      it->second = widen_to_f32(it->second);
      out.push_back(s);
      continue;
    }
    if (s.linear && s.linear->use == LinearUse::Bf16 && s.linear->kind != LinearKind::Bf16 &&
        s.accepts(it->second.dtype()) && it->second.shape() == s.shape) {
      const LinearSpec& l = *s.linear;
      auto sc = set.tensors.find(scale_name(l, l.kind));
      const WeightSpec& scale_spec = specs.at(i + 1);  // add_linear lists the scale right after the weight
      if (sc == set.tensors.end() || !scale_spec.accepts(sc->second.dtype()) || sc->second.shape() != scale_spec.shape) {
        out.push_back(s);  // invalid (reported by validation): left as stored in a non-strict load
        continue;
      }
      it->second = dequantize_to_bf16(l, l.kind, it->second, sc->second);
      set.origin[s.name] += fmt::format(" ({} dequantized to bf16 at load)", schema::linear_kind_name(l.kind));
      set.tensors.erase(sc);
      for (auto& r : linear_specs(l, LinearKind::Bf16)) out.push_back(std::move(r));
      ++i;  // skip the scale spec
      continue;
    }
    out.push_back(s);
  }
  return out;
}

}  // namespace dsa
