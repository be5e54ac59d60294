#include "dsa/model/dummy_weights.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <set>
#include <thread>

#include <unistd.h>

#include <fmt/format.h>

#include "dsa/core/cuda_launch.h"
#include "dsa/core/cuda_stream.h"
#include "dsa/core/device.h"
#include "dsa/core/error.h"
#include "dsa/core/log.h"
#include "dsa/model/schema/from_model_config.h"

namespace dsa {

using model::dummy::FillKind;
using model::dummy::FillRecipe;
using schema::WeightSpec;

namespace {

bool ends_with(const std::string& s, std::string_view suf) {
  return s.size() >= suf.size() && s.compare(s.size() - suf.size(), suf.size(), suf) == 0;
}

// RMS of the codes the fill writes (dummy_fill.h): e4m3 |x| in [0.5, 2) with a uniform 3-bit
// mantissa, and e2m1 nibbles uniform over its 16 codes.
constexpr double kE4m3CodeRms = 1.159;
constexpr double kE2m1CodeRms = 2.926;

// log2 of the power-of-two scale that brings codes of rms `code_rms` to a weight rms of
// 1/sqrt(in) (the usual initialisation: a linear keeps its input's magnitude).
int scale_exponent(double code_rms, int64_t in) {
  return static_cast<int>(std::lround(std::log2(1.0 / (code_rms * std::sqrt(static_cast<double>(std::max<int64_t>(in, 1)))))));
}

// Linear weights by base name (a scale's recipe needs its linear's `in` and weight dtype).
using LinearIndex = std::map<std::string, std::pair<const schema::LinearSpec*, DType>, std::less<>>;

LinearIndex index_linears(const std::vector<WeightSpec>& specs) {
  LinearIndex idx;
  for (const WeightSpec& s : specs)
    if (s.linear && s.name == s.linear->base + ".weight") idx.emplace(s.linear->base, std::make_pair(&*s.linear, s.dtype));
  return idx;
}

// The linear whose scale tensor is `name` (".scale" / ".weight_scale_inv"), or null.
const schema::LinearSpec* linear_of_scale(const std::string& name, const LinearIndex& idx, DType* weight_dtype) {
  std::string base;
  if (ends_with(name, ".weight_scale_inv")) base = name.substr(0, name.size() - 17);
  else if (ends_with(name, ".scale")) base = name.substr(0, name.size() - 6);
  else return nullptr;
  auto it = idx.find(base);
  if (it == idx.end()) return nullptr;
  *weight_dtype = it->second.second;
  return it->second.first;
}

FillRecipe uniform(DType t, float a, float half_width) {
  FillRecipe r;
  r.kind = t == DType::BF16 ? FillKind::Bf16 : FillKind::F32;
  r.a = a;
  r.b = half_width;
  return r;
}

// a + sd * sqrt(3) * u: uniform with standard deviation sd around a.
FillRecipe around(DType t, float a, float sd) { return uniform(t, a, sd * 1.7320508f); }

}  // namespace

uint64_t dummy_tensor_seed(uint64_t seed, const std::string& name) {
  uint64_t h = 0xCBF29CE484222325ull;  // FNV-1a of the name
  for (unsigned char c : name) h = (h ^ c) * 0x100000001B3ull;
  return model::dummy::element_hash(h, seed);
}

namespace {

FillRecipe recipe(const WeightSpec& s, const LinearIndex& linears, int64_t experts) {
  const std::string& nm = s.name;
  FillRecipe r;
  switch (s.dtype) {
    case DType::E4M3:
      r.kind = FillKind::E4m3;
      return r;
    case DType::I8:
    case DType::U8:
    case DType::FP4X2:
      r.kind = FillKind::Bytes;  // packed e2m1 pairs
      return r;
    case DType::I32:
    case DType::I64:
      DSA_CHECK(s.shape.size() == 2 && s.shape[1] >= 1 && s.shape[1] <= experts,
                "dummy weights: routing table {} {} needs [rows][k] with k <= {} experts", nm, shape_str(s.shape),
                experts);
      r.kind = s.dtype == DType::I32 ? FillKind::RouteI32 : FillKind::RouteI64;
      r.k = static_cast<int32_t>(s.shape[1]);
      r.experts = static_cast<int32_t>(experts);
      return r;
    default:
      break;
  }
  DType weight_dtype = DType::BF16;
  if (const schema::LinearSpec* l = linear_of_scale(nm, linears, &weight_dtype)) {
    const bool mxfp4 = l->kind == schema::LinearKind::Mxfp4 || weight_dtype == DType::I8 || weight_dtype == DType::U8;
    const int e = scale_exponent(mxfp4 ? kE2m1CodeRms : kE4m3CodeRms, l->in);
    if (s.dtype == DType::E8M0) {
      r.kind = FillKind::ConstByte;
      r.byte = static_cast<uint8_t>(127 + e);
      return r;
    }
    DSA_CHECK(s.dtype == DType::F32, "dummy weights: scale {} has dtype {} (expected UE8M0 or F32)", nm,
              dtype_name(s.dtype));
    return uniform(DType::F32, std::ldexp(1.0f, e), 0.f);
  }
  DSA_CHECK(s.dtype == DType::BF16 || s.dtype == DType::F32,
            "dummy weights: {} has dtype {}, which the dummy fill does not produce (E4M3, packed e2m1, UE8M0, BF16, "
            "F32, I32, I64)",
            nm, dtype_name(s.dtype));
  // Roles as make-tiny's fill gives them (checkpoint_tiny.cpp), uniform instead of normal.
  const DType t = s.dtype;
  if (ends_with(nm, "norm.weight") || ends_with(nm, "layernorm.weight")) return around(t, 1.f, 0.1f);
  if (ends_with(nm, "k_norm.bias")) return around(t, 0.f, 0.1f);
  if (ends_with(nm, "_fn")) return around(t, 0.f, 0.05f);
  if (ends_with(nm, "_base")) return around(t, 0.f, 0.1f);
  if (ends_with(nm, "_scale")) return around(t, 1.f, 0.1f);
  if (ends_with(nm, "attn_sink")) return around(t, 0.f, 0.5f);
  if (ends_with(nm, ".ape")) return around(t, 0.f, 0.3f);
  if (ends_with(nm, "gate.bias") || ends_with(nm, "e_score_correction_bias")) return around(t, 0.f, 0.05f);
  if (nm == "embed.weight" || nm == "model.embed_tokens.weight") return around(t, 0.f, 1.f);
  // Any other 2-D tensor is a linear weight [out][in]: rms 1/sqrt(in).
  const float sd = s.shape.size() == 2 ? 1.f / std::sqrt(static_cast<float>(std::max<int64_t>(s.shape[1], 1))) : 0.1f;
  return around(t, 0.f, sd);
}

}  // namespace

FillRecipe dummy_recipe(const WeightSpec& s, const std::vector<WeightSpec>& specs, int64_t experts) {
  return recipe(s, index_linears(specs), experts);
}

void dummy_fill(Tensor& t, const FillRecipe& r, uint64_t tensor_seed) {
  DSA_CHECK(t.is_contiguous(), "dummy_fill: {} is not contiguous", t.str());
  const int64_t n = model::dummy::fill_elements(r, t.numel(), static_cast<int64_t>(dtype_size(t.dtype())));
  if (n == 0) return;
  void* out = t.raw();
  if (t.device().is_cuda()) {
#ifdef DSA_WITH_CUDA
    cuda_launch::set_device(t.device().index);
    model::dummy::launch_dummy_fill(r, tensor_seed, n, out);
    cuda_launch::check_launch("dummy_fill_kernel");
    return;
#else
    fail("dummy_fill: {} is on a CUDA device, but this build has no CUDA", t.str());
#endif
  }
  // Host: chunks of at least 1 M elements over the cores (large tensors of a real-shape model).
  constexpr int64_t kChunk = int64_t{1} << 20;
  const int64_t workers =
      std::min<int64_t>(std::max(1u, std::thread::hardware_concurrency()), (n + kChunk - 1) / kChunk);
  auto run = [&](int64_t lo, int64_t hi) { model::dummy::fill_range(r, tensor_seed, lo, hi, out); };
  if (workers <= 1) return run(0, n);
  std::vector<std::thread> pool;
  const int64_t per = ((n + workers - 1) / workers + 7) / 8 * 8;  // whole 8-byte groups per worker
  for (int64_t w = 0; w < workers; ++w) pool.emplace_back(run, w * per, std::min(n, (w + 1) * per));
  for (auto& th : pool) th.join();
}

namespace {

// Experts sharing one stack: "<ffn>.experts." with members "<ffn>.experts.<e>." (routed) or
// "<ffn>.shared_experts." with itself as the only member.
struct ExpertGroup {
  std::string key;
  std::vector<std::string> members;
};

std::vector<ExpertGroup> expert_groups(const std::map<std::string, const WeightSpec*, std::less<>>& by_name) {
  std::vector<ExpertGroup> groups;
  for (const auto& [name, _] : by_name) {
    if (ends_with(name, ".experts.0.w1.weight")) {
      ExpertGroup g{name.substr(0, name.size() - std::string("0.w1.weight").size()), {}};
      for (int e = 0; by_name.count(fmt::format("{}{}.w1.weight", g.key, e)); ++e)
        g.members.push_back(fmt::format("{}{}.", g.key, e));
      groups.push_back(std::move(g));
    } else if (ends_with(name, ".shared_experts.w1.weight")) {
      ExpertGroup g{name.substr(0, name.size() - std::string("w1.weight").size()), {}};
      g.members.push_back(g.key);
      groups.push_back(std::move(g));
    }
  }
  return groups;
}

const WeightSpec* find(const std::map<std::string, const WeightSpec*, std::less<>>& by_name, const std::string& n) {
  auto it = by_name.find(n);
  return it == by_name.end() ? nullptr : it->second;
}

// Allocates the stacks of group g when every member has the same w1/w3/w2 (and .scale) shapes and
// dtypes, and enters each member's tensors as views into them; false (nothing entered) otherwise.
bool stack_group(const ExpertGroup& g, const std::map<std::string, const WeightSpec*, std::less<>>& by_name,
                 Device dev, LoadedWeights& w) {
  for (const char* suffix : {".weight", ".scale"}) {
    const WeightSpec* w1 = find(by_name, g.members[0] + "w1" + suffix);
    const WeightSpec* w2 = find(by_name, g.members[0] + "w2" + suffix);
    if (std::string(suffix) == ".scale" && !w1 && !w2) continue;  // bf16 experts: no scales
    if (!w1 || !w2 || w1->shape.size() != 2 || w2->shape.size() != 2) return false;
    for (const std::string& m : g.members)
      for (const char* part : {"w1", "w3", "w2"}) {
        const WeightSpec* s = find(by_name, m + part + suffix);
        const WeightSpec* ref = std::string(part) == "w2" ? w2 : w1;
        if (!s || s->shape != ref->shape || s->dtype != ref->dtype) return false;
      }
  }
  const auto E = static_cast<int64_t>(g.members.size());
  for (const char* suffix : {".weight", ".scale"}) {
    const WeightSpec* w1 = find(by_name, g.members[0] + "w1" + suffix);
    if (!w1) continue;
    const WeightSpec* w2 = find(by_name, g.members[0] + "w2" + suffix);
    const int64_t rows = w1->shape[0];
    Tensor w13 = Tensor::empty({E, 2 * rows, w1->shape[1]}, w1->dtype, dev);
    Tensor w2s = Tensor::empty({E, w2->shape[0], w2->shape[1]}, w2->dtype, dev);
    for (int64_t e = 0; e < E; ++e) {
      const std::string& m = g.members[static_cast<size_t>(e)];
      w.tensors.emplace(m + "w1" + suffix, w13.select(0, e).slice(0, 0, rows));
      w.tensors.emplace(m + "w3" + suffix, w13.select(0, e).slice(0, rows, 2 * rows));
      w.tensors.emplace(m + "w2" + suffix, w2s.select(0, e));
    }
    w.expert_stacks.emplace(g.key + "w13" + suffix, std::move(w13));
    w.expert_stacks.emplace(g.key + "w2" + suffix, std::move(w2s));
  }
  return true;
}

}  // namespace

LoadedWeights dummy_weights(const std::vector<WeightSpec>& specs, const DummyOptions& opt, const std::string& label) {
  const auto t0 = std::chrono::steady_clock::now();
  if (opt.device.is_cuda())
    DSA_CHECK(opt.device.index >= 0 && opt.device.index < static_cast<int>(cuda_devices().size()),
              "dummy weights: no CUDA device {} ({})", opt.device.index, cuda_unavailable_reason());
  // The config alone sets the size (no checkpoint bounds it): refuse what cannot fit before
  // allocating, with the way out.
  uint64_t need = 0;
  for (const WeightSpec& s : specs) {
    uint64_t n = dtype_size(s.dtype);
    for (int64_t d : s.shape) n *= static_cast<uint64_t>(d);
    need += n;
  }
  const uint64_t room = opt.device.is_cuda()
                            ? cuda_memory_info(opt.device.index).free
                            : static_cast<uint64_t>(sysconf(_SC_PHYS_PAGES)) * static_cast<uint64_t>(sysconf(_SC_PAGE_SIZE));
  DSA_CHECK(need <= room,
            "dummy weights for {}: {:.1f} GiB of weights, but {} has {:.1f} GiB {}: fewer layers (--layers N) fit",
            label, need / 1073741824.0, opt.device.str(), room / 1073741824.0, opt.device.is_cuda() ? "free" : "of memory");
  LoadedWeights w;
  std::map<std::string, const WeightSpec*, std::less<>> by_name;
  for (const WeightSpec& s : specs)
    DSA_CHECK(by_name.emplace(s.name, &s).second, "dummy weights: the spec lists '{}' twice (spec bug)", s.name);
  for (const ExpertGroup& g : expert_groups(by_name)) stack_group(g, by_name, opt.device, w);
  const LinearIndex linears = index_linears(specs);
  for (const WeightSpec& s : specs) {
    auto it = w.tensors.find(s.name);
    if (it == w.tensors.end()) it = w.tensors.emplace(s.name, Tensor::empty(s.shape, s.dtype, opt.device)).first;
    dummy_fill(it->second, recipe(s, linears, opt.experts), dummy_tensor_seed(opt.seed, s.name));
    w.bytes += it->second.nbytes();
  }
  // The fills run on the current stream; copies the model's build makes may not (Tensor::to).
  if (opt.device.is_cuda()) cuda_stream::synchronize();
  w.report.expected = specs.size();
  w.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  log_info("dummy weights for {}: {} tensors, {:.1f} MiB filled on {} in {:.2f} s (seed {})", label, w.tensors.size(),
           w.bytes / 1048576.0, opt.device.str(), w.seconds, opt.seed);
  log_warn("{}: dummy weights (--load-format dummy): random values, outputs are meaningless", label);
  return w;
}

LoadedWeights dummy_model_weights(const model::ModelConfig& config, Device device, uint64_t seed, bool mtp) {
  std::vector<WeightSpec> specs;
  if (config.arch == model::Arch::DeepseekV4) {
    schema::DeepseekV4Dims d = schema::deepseek_v4_dims(config);
    if (!mtp) {
      d.mtp_layers = 0;
      d.compress_ratios.resize(static_cast<size_t>(d.layers));
    }
    specs = schema::deepseek_v4_weight_specs(d);
  } else {
    schema::Glm5Dims d = schema::glm5_dims(config);
    if (!mtp) d.mtp_layers = 0;
    specs = schema::glm5_weight_specs(d);
  }
  DummyOptions o;
  o.device = device;
  o.seed = seed;
  o.experts = std::max<int64_t>(config.n_routed_experts, 1);
  return dummy_weights(specs, o, config.name.empty() ? std::string(model::arch_name(config.arch)) : config.name);
}

}  // namespace dsa
