// `dsa select --model NAME|DIR [--capability X.Y|none] [--attention-backend NAME]
//             [--kv-cache-dtype D] [--block-size N] [--json]`
// For each attention layer type of the model: the backend chosen on that platform, the page size
// and bytes of every cache the layer type needs, the other valid backends and the reasons the
// rest were rejected. Exits non-zero, with the full reasons, when a layer type has no backend.
#include <cstdio>
#include <memory>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "dsa/attention/plan.h"
#include "dsa/attention/registry.h"
#include "dsa/core/device.h"
#include "dsa/core/error.h"
#include "dsa/model/config.h"

namespace dsa::cli {
namespace {

struct SelectArgs {
  std::string model;
  std::string capability;
  std::string backend;
  std::string kv_cache_dtype = "auto";
  int block_size = 0;
  bool json = false;
};

struct Platform {
  std::optional<Capability> capability;
  std::string source;  // where the capability came from
};

Platform resolve_platform(const std::string& arg) {
  Platform p;
  if (!arg.empty()) {
    if (arg == "none" || arg == "cpu") {
      p.source = "--capability " + arg + ": CPU platform";
    } else {
      p.capability = Capability::parse(arg);
      p.source = "--capability " + arg;
    }
    return p;
  }
  if (auto ov = capability_override()) {
    p.capability = ov;
    p.source = "DSA_DEVICE_CAPABILITY=" + ov->str();
    return p;
  }
  const auto& devs = cuda_devices();
  if (!devs.empty()) {
    p.capability = devs[0].capability;
    p.source = fmt::format("cuda:0 {}", devs[0].name);
  } else {
    p.source = "no CUDA device: " + cuda_unavailable_reason();
  }
  return p;
}

std::string layer_summary(const attn::AttentionLayerSpec& s) {
  std::string keys;
  switch (s.kind) {
    case attn::LayerKind::Sliding: keys = fmt::format("window {}", s.window); break;
    case attn::LayerKind::Csa:
      keys = fmt::format("window {} + top-{} compressed (1 per {} tokens)", s.window, s.topk, s.compress_ratio);
      break;
    case attn::LayerKind::Hca:
      keys = fmt::format("window {} + all compressed (1 per {} tokens)", s.window, s.compress_ratio);
      break;
    case attn::LayerKind::MlaSparse: keys = fmt::format("indexer top-{}", s.topk); break;
  }
  std::string layers = fmt::format("{} layer{}", s.num_layers, s.num_layers == 1 ? "" : "s");
  if (s.num_mtp_layers) layers += fmt::format(" + {} MTP", s.num_mtp_layers);
  return fmt::format("{}: {}; {} heads, d_qk {}, d_v {}, {}{}", layer_kind_name(s.kind), layers, s.num_heads,
                     s.head_size, s.v_head_size, keys, s.sink ? ", sink" : "");
}

std::string reasons_text(const std::vector<std::string>& r) { return fmt::format("[{}]", fmt::join(r, ", ")); }

// Registered backends outside this platform's candidate list, with the reasons they do not fit.
std::vector<attn::Rejection> non_candidates(const attn::LayerPlan& lp) {
  std::vector<attn::Rejection> out;
  if (lp.selection.forced) return out;
  for (const auto* b : attn::attention_backend_registry().all()) {
    bool seen = lp.selection.backend == b;
    for (const auto* o : lp.selection.other_valid) seen |= o == b;
    for (const auto& r : lp.selection.rejected) seen |= r.backend == b->name();
    if (!seen) out.push_back({std::string(b->name()), b->reasons(lp.query)});
  }
  return out;
}

nlohmann::json plan_json(const model::ModelConfig& m, const Platform& p, const SelectArgs& a,
                         const std::vector<attn::LayerPlan>& plans, double total) {
  nlohmann::json j;
  j["model"] = m.name;
  j["arch"] = std::string(model::arch_name(m.arch));
  j["platform"] = plans.empty() ? "" : plans[0].query.platform();
  j["capability"] = p.capability ? nlohmann::json(p.capability->str()) : nlohmann::json(nullptr);
  j["capability_source"] = p.source;
  j["block_size"] = a.block_size;
  j["kv_cache_dtype_requested"] = a.kv_cache_dtype;
  bool ok = true;
  nlohmann::json layers = nlohmann::json::array();
  for (const auto& lp : plans) {
    const auto& s = lp.spec;
    nlohmann::json l;
    l["type"] = std::string(layer_kind_name(s.kind));
    l["layers"] = s.num_layers;
    l["mtp_layers"] = s.num_mtp_layers;
    l["num_heads"] = s.num_heads;
    l["head_size"] = s.head_size;
    l["v_head_size"] = s.v_head_size;
    l["window"] = s.window;
    l["compress_ratio"] = s.compress_ratio;
    l["topk"] = s.topk;
    l["attends_all_compressed"] = s.attends_all_compressed;
    l["sink"] = s.sink;
    l["kv_cache_dtype"] = std::string(kv_cache_dtype_name(lp.query.kv_cache_dtype));
    l["query"] = lp.query.describe();
    l["backend"] = lp.selection.backend ? nlohmann::json(std::string(lp.selection.backend->name())) : nlohmann::json(nullptr);
    l["forced"] = lp.selection.forced;
    nlohmann::json other = nlohmann::json::array();
    for (const auto* b : lp.selection.other_valid) other.push_back(std::string(b->name()));
    l["other_valid"] = other;
    nlohmann::json rej = nlohmann::json::object();
    for (const auto& r : lp.selection.rejected) rej[r.backend] = r.reasons;
    l["rejected"] = rej;
    nlohmann::json nc = nlohmann::json::object();
    for (const auto& r : non_candidates(lp)) nc[r.backend] = r.reasons;
    l["not_candidates"] = nc;
    if (!lp.selection.backend) {
      l["error"] = lp.selection.error;
      ok = false;
    }
    nlohmann::json caches = nlohmann::json::array();
    for (const auto& c : lp.caches) {
      caches.push_back({{"cache", std::string(attn::cache_role_name(c.spec.role))},
                        {"layout", c.layout},
                        {"ratio", c.spec.ratio},
                        {"page_size", c.page_size},
                        {"page_bytes", c.page_bytes},
                        {"page_shape", c.page_shape},
                        {"bytes_per_entry", c.bytes_per_entry},
                        {"bytes_per_token", c.bytes_per_token},
                        {"window_bounded", c.spec.window_bounded},
                        {"max_live_pages", c.max_live_pages},
                        {"read_by", c.spec.attention_read ? "attention" : "indexer"},
                        {"layers", c.spec.layers}});
    }
    l["caches"] = caches;
    l["bytes_per_token"] = lp.bytes_per_token;
    layers.push_back(l);
  }
  j["layer_types"] = layers;
  j["kv_bytes_per_token_all_layers"] = ok ? nlohmann::json(total) : nlohmann::json(nullptr);
  j["ok"] = ok;
  return j;
}

void print_text(const model::ModelConfig& m, const Platform& p, const SelectArgs& a,
                const std::vector<attn::LayerPlan>& plans, double total) {
  std::printf("model: %s (%s, %d layers + %d MTP)\n", m.name.c_str(), std::string(model::arch_name(m.arch)).c_str(),
              m.num_layers, m.num_mtp_layers);
  std::printf("platform: %s (%s)\n", plans.empty() ? "?" : plans[0].query.platform().c_str(), p.source.c_str());
  std::printf("block size: %d tokens; kv-cache dtype: %s; activations: bf16\n", a.block_size, a.kv_cache_dtype.c_str());
  for (const auto& lp : plans) {
    std::printf("\n%s\n", layer_summary(lp.spec).c_str());
    std::printf("  kv-cache dtype: %s\n", std::string(kv_cache_dtype_name(lp.query.kv_cache_dtype)).c_str());
    if (lp.selection.backend) {
      std::vector<std::string_view> others;
      for (const auto* b : lp.selection.other_valid) others.push_back(b->name());
      std::printf("  backend: %s%s\n", std::string(lp.selection.backend->name()).c_str(),
                  lp.selection.forced ? fmt::format(" (forced by {})", lp.selection.forced_source).c_str() : "");
      std::printf("  other valid: %s\n", others.empty() ? "none" : fmt::format("{}", fmt::join(others, ", ")).c_str());
      std::printf("  caches:\n");
      for (const auto& c : lp.caches) {
        std::string unit = c.spec.ratio == 1 ? "tokens" : fmt::format("entries (1 per {} tokens)", c.spec.ratio);
        std::string use = c.spec.window_bounded
                              ? fmt::format("window-bounded: <= {} pages per request", c.max_live_pages)
                              : fmt::format("{:.2f} B per context token", c.bytes_per_token);
        std::printf("    %-10s %-11s page %d %s, %zu B/page (%.2f B/entry); %s%s\n",
                    std::string(attn::cache_role_name(c.spec.role)).c_str(), c.layout.c_str(), c.page_size,
                    unit.c_str(), c.page_bytes, c.bytes_per_entry, use.c_str(),
                    c.spec.attention_read ? "" : " [indexer]");
      }
      std::printf("  per layer: %.2f B per context token%s\n", lp.bytes_per_token,
                  lp.spec.window > 0 ? " (beyond the window)" : "");
    } else {
      std::printf("  backend: NONE\n  %s\n", lp.selection.error.c_str());
    }
    for (const auto& r : lp.selection.rejected)
      if (lp.selection.backend) std::printf("  rejected %s: %s\n", r.backend.c_str(), reasons_text(r.reasons).c_str());
    for (const auto& r : non_candidates(lp))
      std::printf("  not a candidate here %s: %s\n", r.backend.c_str(), reasons_text(r.reasons).c_str());
  }
  bool ok = true, windowed = false;
  for (const auto& lp : plans) {
    ok &= lp.selection.backend != nullptr;
    windowed |= lp.spec.window > 0;
  }
  if (ok)
    std::printf("\nKV cache, all layers: %.2f B per context token%s\n", total,
                windowed ? " (beyond the sliding windows)" : "");
}

void run_select(const SelectArgs& in) {
  attn::register_builtin_attention_backends();
  SelectArgs a = in;
  model::ModelConfig m = model::load_model_config(a.model);
  if (a.block_size == 0) a.block_size = m.arch == model::Arch::DeepseekV4 ? 256 : 64;
  DSA_CHECK(a.block_size > 0, "--block-size {} must be > 0", a.block_size);
  Platform p = resolve_platform(a.capability);

  attn::PlanOptions opt;
  opt.capability = p.capability;
  if (build_info().cuda) opt.build_cuda_archs = build_cuda_arch_list();  // reject devices without a kernel image
  opt.kv_cache_dtype = attn::parse_kv_cache_dtype(a.kv_cache_dtype);
  opt.block_size = a.block_size;
  opt.select.forced = a.backend;
  opt.select.forced_source = "--attention-backend";
  auto plans = attn::plan_attention(m.attention_layers(), opt);

  double total = 0;
  int failed = 0;
  for (const auto& lp : plans) {
    total += lp.bytes_per_token * (lp.spec.num_layers + lp.spec.num_mtp_layers);
    failed += lp.selection.backend == nullptr;
  }
  if (a.json)
    std::printf("%s\n", plan_json(m, p, a, plans, total).dump(2).c_str());
  else
    print_text(m, p, a, plans, total);
  if (failed) {
    std::fprintf(stderr, "dsa select: no valid attention backend for %d layer type(s) of %s\n", failed,
                 m.name.c_str());
    for (const auto& lp : plans)
      if (!lp.selection.backend)
        std::fprintf(stderr, "  %s: %s\n", std::string(layer_kind_name(lp.spec.kind)).c_str(),
                     lp.selection.error.c_str());
    set_exit_code(1);
  }
}

const bool registered = add_command([](CLI::App& app) {
  auto* cmd = app.add_subcommand("select", "Attention backend, page sizes and cache bytes per layer type of a model");
  auto a = std::make_shared<SelectArgs>();
  cmd->add_option("--model", a->model, "Built-in name (deepseek-v4-flash, deepseek-v4-pro, glm-5.1) or checkpoint dir")
      ->required();
  cmd->add_option("--capability", a->capability,
                  "Select as on this compute capability (X.Y), or 'none' for the CPU platform "
                  "(default: DSA_DEVICE_CAPABILITY, else GPU 0, else CPU)");
  cmd->add_option("--attention-backend", a->backend, "Force this backend (validated alone; also DSA_ATTENTION_BACKEND)");
  cmd->add_option("--kv-cache-dtype", a->kv_cache_dtype, "auto | fp8 | fp8_ds_mla | fp8_model1 | bf16");
  cmd->add_option("--block-size", a->block_size, "Tokens per KV block (default: 256 for DeepSeek-V4, 64 for GLM)");
  cmd->add_flag("--json", a->json, "Print JSON");
  cmd->callback([a] { run_select(*a); });
});

}  // namespace
}  // namespace dsa::cli
