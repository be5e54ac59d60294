#include "dsa/model/checkpoint_load.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <regex>
#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "dsa/core/error.h"
#include "dsa/core/log.h"
#include "dsa/model/config_bounds.h"
#include "dsa/model/weight_forms.h"
#include "dsa/model/schema/from_model_config.h"

namespace dsa {

namespace {

// Minimal progress display for loading (stderr; redraws in place on a TTY, a line per 25 %
// otherwise; DSA_PROGRESS=0 disables). To be replaced by core/progress.h once it lands.
class LoadProgress {
 public:
  LoadProgress(bool enabled, std::string title, uint64_t total)
      : title_(std::move(title)), total_(total), start_(std::chrono::steady_clock::now()) {
    const char* env = std::getenv("DSA_PROGRESS");
    enabled_ = enabled && total > 0 && !(env && std::string(env) == "0");
    tty_ = isatty(fileno(stderr));
  }
  void advance(uint64_t n) {
    done_ += n;
    if (!enabled_) return;
    const auto now = std::chrono::steady_clock::now();
    const int quarter = static_cast<int>(4 * done_ / total_);
    if (tty_ ? (now - last_ > std::chrono::milliseconds(100) || done_ == total_) : quarter != last_quarter_) {
      draw(done_ == total_);
      last_ = now;
      last_quarter_ = quarter;
    }
  }

 private:
  void draw(bool final) {
    const double pct = 100.0 * static_cast<double>(done_) / static_cast<double>(total_);
    const int width = 30, fill = static_cast<int>(pct / 100.0 * width);
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    std::string bar = std::string(fill, '#') + std::string(width - fill, '-');
    std::fprintf(stderr, "%s%s [%s] %5.1f%% %.1f/%.1f MiB %.1fs%s", tty_ ? "\r" : "", title_.c_str(), bar.c_str(), pct,
                 done_ / 1048576.0, total_ / 1048576.0, secs, (final || !tty_) ? "\n" : "");
    std::fflush(stderr);
  }
  std::string title_;
  uint64_t total_ = 0, done_ = 0;
  bool enabled_ = false, tty_ = false;
  int last_quarter_ = -1;
  std::chrono::steady_clock::time_point start_, last_{};
};

}  // namespace

const Tensor& LoadedWeights::get(std::string_view name) const {
  auto it = tensors.find(name);
  DSA_CHECK(it != tensors.end(), "weight '{}' was not loaded", name);
  return it->second;
}

TensorSet tensor_set(const Checkpoint& ckpt) {
  TensorSet s;
  for (const auto& n : ckpt.names()) {
    s.tensors.emplace(n, ckpt.get(n));
    s.origin.emplace(n, ckpt.file_of(n).path());
  }
  return s;
}

TensorSet deepseek_v4_official_view(const Checkpoint& ckpt, std::vector<std::string>* unmapped) {
  TensorSet s;
  static const std::regex fused(R"(^model\.layers\.(\d+)\.mlp\.experts\.(gate_up_proj|down_proj)$)");
  auto add = [&](const std::string& name, Tensor t, std::string origin) {
    DSA_CHECK(s.tensors.emplace(name, std::move(t)).second, "{}: two tensors map to the official name '{}'",
              ckpt.dir(), name);
    s.origin.emplace(name, std::move(origin));
  };
  for (const auto& n : ckpt.names()) {
    const std::string file = ckpt.file_of(n).path();
    std::smatch m;
    if (std::regex_match(n, m, fused)) {
      Tensor t = ckpt.get(n);
      DSA_CHECK(t.dim() == 3, "{} ({}): fused expert tensor must be 3-D [E][out][in], got {}", n, file, t.str());
      DSA_CHECK(t.size(0) <= model::bounds::kMaxExperts, "{} ({}): {} experts (at most {} supported)", n, file,
                t.size(0), model::bounds::kMaxExperts);
      const std::string layer = m[1];
      for (int64_t e = 0; e < t.size(0); ++e) {
        const std::string base = fmt::format("layers.{}.ffn.experts.{}.", layer, e);
        Tensor te = t.select(0, e);
        if (m[2] == "gate_up_proj") {
          DSA_CHECK(te.size(0) % 2 == 0, "{} ({}): gate_up_proj rows {} are not even", n, file, te.size(0));
          const int64_t I = te.size(0) / 2;
          add(base + "w1.weight", te.slice(0, 0, I), fmt::format("{}: {}[{}][0:{}]", file, n, e, I));
          add(base + "w3.weight", te.slice(0, I, 2 * I), fmt::format("{}: {}[{}][{}:{}]", file, n, e, I, 2 * I));
        } else {
          add(base + "w2.weight", te, fmt::format("{}: {}[{}]", file, n, e));
        }
      }
      continue;
    }
    auto official = schema::deepseek_v4_official_name(n);
    if (!official) {
      if (unmapped) unmapped->push_back(n);
      continue;
    }
    add(*official, ckpt.get(n), fmt::format("{}: {}", file, n));
  }
  return s;
}

schema::ValidationReport validate(const TensorSet& set, const std::vector<schema::WeightSpec>& specs) {
  schema::ValidationReport r;
  r.expected = specs.size();
  std::set<std::string, std::less<>> expected;
  for (const auto& s : specs) {
    expected.insert(s.name);
    auto it = set.tensors.find(s.name);
    if (it == set.tensors.end()) {
      r.missing.push_back(s.name);
      continue;
    }
    const Tensor& t = it->second;
    if (!s.accepts(t.dtype()) || t.shape() != s.shape) {
      std::string form;
      if (s.linear && s.linear->forms.size() > 1) {
        form = " (stored forms accepted: ";
        for (size_t i = 0; i < s.linear->forms.size(); ++i)
          form += fmt::format("{}{}", i ? ", " : "", schema::linear_kind_name(s.linear->forms[i]));
        form += ")";
      }
      r.mismatched.push_back(fmt::format("{} (in {}): expected {} {}, got {} {}{}", s.name, set.origin.at(s.name),
                                         schema::accepted_dtypes_str(s), shape_str(s.shape), dtype_name(t.dtype()),
                                         shape_str(t.shape()), form));
    }
  }
  for (const auto& [n, _] : set.tensors)
    if (!expected.count(n)) r.unknown.push_back(n);
  return r;
}

LoadedWeights load_weights(const TensorSet& in, const std::vector<schema::WeightSpec>& listed,
                           const LoadOptions& opt, const std::string& label) {
  const auto t0 = std::chrono::steady_clock::now();
  LoadedWeights w;
  // Each linear in the form the checkpoint stores it (weight_forms.h), then validation of what
  // is stored, then conversion of what the model does not read as stored.
  const std::vector<schema::WeightSpec> stored = resolve_linear_forms(in, listed);
  w.report = validate(in, stored);
  if (opt.strict) w.report.throw_if_invalid(label);
  if (!w.report.unknown.empty()) {
    std::string list;
    for (size_t i = 0; i < w.report.unknown.size() && i < 8; ++i) list += (i ? ", " : "") + w.report.unknown[i];
    if (w.report.unknown.size() > 8) list += ", ...";
    log_warn("{}: {} tensors are not part of the model and are not used: {}", label, w.report.unknown.size(), list);
  }
  TensorSet set = in;  // views: copying the set copies no data
  const std::vector<schema::WeightSpec> specs = convert_for_model(set, stored);
  uint64_t total = 0;
  for (const auto& s : specs)
    if (auto it = set.tensors.find(s.name); it != set.tensors.end()) total += it->second.nbytes();
  LoadProgress bar(opt.progress && opt.device.is_cuda(), fmt::format("loading {}", label), total);
  for (const auto& s : specs) {
    auto it = set.tensors.find(s.name);
    if (it == set.tensors.end()) continue;  // non-strict load
    // CPU: the memory-mapped view itself (contiguous copy only for strided views of fused tensors).
    Tensor t = opt.device.is_cuda() ? it->second.to(opt.device) : it->second.contiguous();
    w.bytes += t.nbytes();
    bar.advance(t.nbytes());
    w.tensors.emplace(s.name, std::move(t));
  }
  w.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  log_info("loaded {}: {} tensors, {:.1f} MiB to {} in {:.2f} s", label, w.tensors.size(), w.bytes / 1048576.0,
           opt.device.str(), w.seconds);
  return w;
}

namespace {

// Before listing the expected tensors (a name per expert and layer: a config.json claiming 1000
// layers of 4096 experts would list 12 M names), compare the count the config implies with the
// tensors present.
void check_expert_count(const std::string& dir, int64_t moe_layers, int64_t experts, size_t present) {
  const int64_t need = moe_layers * experts * 3;  // at least one weight per expert projection
  DSA_CHECK(need <= static_cast<int64_t>(present),
            "{}: config.json describes {} MoE layers of {} experts ({} expert weights), but the checkpoint holds "
            "only {} tensors: config.json does not belong to these weights",
            dir, moe_layers, experts, need, present);
}

}  // namespace

LoadedWeights load_deepseek_v4(const std::string& dir, const LoadOptions& opt, schema::DeepseekV4Dims* dims_out) {
  const model::ModelConfig cfg = model::load_model_config(dir);
  DSA_CHECK(cfg.arch == model::Arch::DeepseekV4, "{}: config.json describes a {} model, not deepseek_v4", dir,
            model::arch_name(cfg.arch));
  return load_deepseek_v4(dir, schema::deepseek_v4_dims(cfg), opt, dims_out);
}

LoadedWeights load_deepseek_v4(const std::string& dir, schema::DeepseekV4Dims dims, const LoadOptions& opt,
                               schema::DeepseekV4Dims* dims_out) {
  Checkpoint ckpt = Checkpoint::open(dir);
  TensorSet set;
  const bool official_layout = ckpt.has("embed.weight") || !ckpt.has("model.embed_tokens.weight");
  if (official_layout) {
    set = tensor_set(ckpt);
  } else {
    // transformers layout: official view; transformers does not save MTP layers. Stored forms
    // (bf16 or quantized, any float dtype of small vectors) are resolved in load_weights.
    std::vector<std::string> unmapped;
    set = deepseek_v4_official_view(ckpt, &unmapped);
    for (const auto& n : unmapped) {
      set.tensors.emplace(n, ckpt.get(n));  // reported as unknown by the validator
      set.origin.emplace(n, ckpt.file_of(n).path());
    }
    if (dims.mtp_layers > 0 && !set.tensors.count("mtp.0.e_proj.weight")) {
      log_warn("{}: transformers-layout checkpoint without MTP weights; MTP disabled", dir);
      dims.mtp_layers = 0;
      dims.compress_ratios.resize(static_cast<size_t>(dims.layers));
    }
  }
  check_expert_count(dir, dims.layers + dims.mtp_layers, dims.experts, set.tensors.size());
  const auto specs = schema::deepseek_v4_weight_specs(dims);
  if (dims_out) *dims_out = dims;
  return load_weights(set, specs, opt, dir);
}

LoadedWeights load_glm5(const std::string& dir, const LoadOptions& opt, schema::Glm5Dims* dims_out) {
  const model::ModelConfig cfg = model::load_model_config(dir);
  DSA_CHECK(cfg.arch == model::Arch::GlmMoeDsa, "{}: config.json describes a {} model, not glm_moe_dsa", dir,
            model::arch_name(cfg.arch));
  const auto dims = schema::glm5_dims(cfg);
  if (dims_out) *dims_out = dims;
  return load_glm5(dir, dims, opt);
}

LoadedWeights load_glm5(const std::string& dir, const schema::Glm5Dims& dims, const LoadOptions& opt) {
  TensorSet set = tensor_set(Checkpoint::open(dir));
  check_expert_count(dir, dims.layers - dims.first_dense + dims.mtp_layers, dims.experts, set.tensors.size());
  return load_weights(set, schema::glm5_weight_specs(dims), opt, dir);
}

LoadedWeights load_model_weights(const std::string& dir, const model::ModelConfig& config, const LoadOptions& opt) {
  if (config.arch == model::Arch::DeepseekV4) return load_deepseek_v4(dir, schema::deepseek_v4_dims(config), opt);
  return load_glm5(dir, schema::glm5_dims(config), opt);
}

}  // namespace dsa
