#include "dsa/model/schema/weight_spec.h"

#include <algorithm>
#include <set>

#include <fmt/format.h>

#include "dsa/core/error.h"
#include "dsa/model/checkpoint.h"

namespace dsa::schema {

bool WeightSpec::reads(DType t) const {
  return t == dtype || std::find(also.begin(), also.end(), t) != also.end();
}

bool WeightSpec::accepts(DType t) const {
  return reads(t) || (any_float && (t == DType::F32 || t == DType::BF16 || t == DType::F16));
}

std::string_view linear_kind_name(LinearKind k) {
  switch (k) {
    case LinearKind::Bf16: return "bf16";
    case LinearKind::Fp8Ue8m0: return "fp8 (e4m3 + UE8M0 .scale)";
    case LinearKind::Fp8F32Inv: return "fp8 (e4m3 + f32 .weight_scale_inv)";
    case LinearKind::Mxfp4: return "mxfp4 (packed e2m1 + UE8M0 .scale)";
  }
  return "?";
}

void add_linear(std::vector<WeightSpec>& specs, const std::string& base, int64_t out, int64_t in, LinearKind kind,
                std::vector<LinearKind> also, LinearUse use) {
  LinearSpec l{base, out, in, kind, {kind}, use};
  for (LinearKind k : also)
    if (std::find(l.forms.begin(), l.forms.end(), k) == l.forms.end()) l.forms.push_back(k);
  switch (kind) {
    case LinearKind::Bf16:
      specs.push_back({base + ".weight", {out, in}, DType::BF16});
      break;
    case LinearKind::Fp8Ue8m0:
      specs.push_back({base + ".weight", {out, in}, DType::E4M3});
      specs.push_back({base + ".scale", {ceil_div(out, kFp8Block), ceil_div(in, kFp8Block)}, DType::E8M0});
      break;
    case LinearKind::Fp8F32Inv:
      specs.push_back({base + ".weight", {out, in}, DType::E4M3});
      specs.push_back({base + ".weight_scale_inv", {ceil_div(out, kFp8Block), ceil_div(in, kFp8Block)}, DType::F32});
      break;
    case LinearKind::Mxfp4:
      DSA_CHECK(in % kMxfp4Block == 0, "{}: MXFP4 input dimension {} is not a multiple of {}", base, in, kMxfp4Block);
      specs.push_back({base + ".weight", {out, in / 2}, DType::I8, {DType::U8}});
      specs.push_back({base + ".scale", {out, in / kMxfp4Block}, DType::E8M0});
      break;
  }
  WeightSpec& w = specs[specs.size() - (kind == LinearKind::Bf16 ? 1 : 2)];
  w.linear = std::move(l);
}

std::string accepted_dtypes_str(const WeightSpec& s) {
  std::string r(dtype_name(s.dtype));
  for (DType t : s.also) r += fmt::format(" or {}", dtype_name(t));
  if (s.any_float) r += " (any of F32, BF16, F16)";
  return r;
}

ValidationReport validate(const Checkpoint& ckpt, const std::vector<WeightSpec>& specs) {
  ValidationReport r;
  r.expected = specs.size();
  std::set<std::string> expected;
  for (const auto& s : specs) {
    DSA_CHECK(expected.insert(s.name).second, "weight spec lists '{}' twice (spec bug)", s.name);
    if (!ckpt.has(s.name)) {
      r.missing.push_back(s.name);
      continue;
    }
    const SafetensorsEntry& e = ckpt.entry(s.name);
    const bool dt_ok = s.accepts(e.dtype), sh_ok = e.shape == s.shape;
    if (!dt_ok || !sh_ok)
      r.mismatched.push_back(fmt::format("{} (in {}): expected {} {}, got {} {}", s.name, ckpt.file_of(s.name).path(),
                                         accepted_dtypes_str(s), shape_str(s.shape), e.dtype_name, shape_str(e.shape)));
  }
  for (const auto& n : ckpt.names())
    if (!expected.count(n)) r.unknown.push_back(n);
  return r;
}

std::string ValidationReport::summary(size_t max_list) const {
  std::string s;
  auto list = [&](const char* title, const std::vector<std::string>& v) {
    if (v.empty()) return;
    s += fmt::format("{} {}:\n", v.size(), title);
    for (size_t i = 0; i < v.size() && i < max_list; ++i) s += "  " + v[i] + "\n";
    if (v.size() > max_list) s += fmt::format("  ... and {} more\n", v.size() - max_list);
  };
  list("missing tensors", missing);
  list("tensors with the wrong shape or dtype", mismatched);
  list("unknown tensors (not used)", unknown);
  if (s.empty()) s = fmt::format("all {} expected tensors present with the expected shapes and dtypes\n", expected);
  return s;
}

void ValidationReport::throw_if_invalid(const std::string& what) const {
  if (!ok()) fail("checkpoint {} does not match the model:\n{}", what, summary());
}

}  // namespace dsa::schema
