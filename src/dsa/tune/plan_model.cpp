#include "dsa/tune/plan_model.h"

#include <algorithm>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "dsa/core/error.h"

namespace dsa::tune {

const char* attention_kind_name(AttentionKind k) {
  switch (k) {
    case AttentionKind::SlidingOnly: return "swa";
    case AttentionKind::Csa: return "csa";
    case AttentionKind::Hca: return "hca";
    case AttentionKind::Dsa: return "dsa";
  }
  return "?";
}

std::vector<AttentionKind> PlanModel::distinct_kinds() const {
  std::vector<AttentionKind> out;
  for (auto k : layer_kinds)
    if (std::find(out.begin(), out.end(), k) == out.end()) out.push_back(k);
  return out;
}

void PlanModel::validate() const {
  auto pos = [&](const char* f, int v) { DSA_CHECK(v > 0, "model {}: {} must be > 0, got {}", name, f, v); };
  pos("num_heads", num_heads);
  pos("d_qk", d_qk);
  pos("d_v", d_v);
  pos("index_topk", index_topk);
  DSA_CHECK(!layer_kinds.empty(), "model {}: no layers", name);
  DSA_CHECK(sliding_window >= 0, "model {}: sliding_window must be >= 0, got {}", name, sliding_window);
}

namespace {

std::vector<AttentionKind> v4_kinds(const std::vector<int>& ratios, const std::string& name) {
  std::vector<AttentionKind> k;
  for (int r : ratios) {
    if (r == 0) k.push_back(AttentionKind::SlidingOnly);
    else if (r == 4) k.push_back(AttentionKind::Csa);
    else if (r == 128) k.push_back(AttentionKind::Hca);
    else fail("model {}: compress ratio {} is not 0, 4 or 128", name, r);
  }
  return k;
}

// REFERENCE.md section 1: Flash [0,0, 4,128, ..., 4] (43 layers), Pro [128,128, 4,128, ..., 4] (61).
std::vector<int> v4_ratios(int first, int layers) {
  std::vector<int> r{first, first};
  for (int i = 2; i < layers; ++i) r.push_back(i % 2 == 0 ? 4 : 128);
  return r;
}

PlanModel builtin(const std::string& n) {
  PlanModel m;
  m.name = n;
  if (n == "deepseek-v4-flash" || n == "deepseek-v4-pro") {
    bool pro = n == "deepseek-v4-pro";
    m.model_type = "deepseek_v4";
    m.num_heads = pro ? 128 : 64;
    m.d_qk = 512;
    m.d_v = 512;
    m.index_topk = pro ? 1024 : 512;
    m.sliding_window = 128;
    m.layer_kinds = v4_kinds(v4_ratios(pro ? 128 : 0, pro ? 61 : 43), n);
    m.hidden_size = pro ? 7168 : 4096;
    m.moe_intermediate_size = pro ? 3072 : 2048;
    m.n_routed_experts = pro ? 384 : 256;
    m.experts_per_token = 6;
  } else if (n == "glm-5.1" || n == "glm-5") {
    m.model_type = "glm_moe_dsa";
    m.num_heads = 64;
    m.d_qk = 576;
    m.d_v = 512;
    m.index_topk = 2048;
    m.layer_kinds.assign(78, AttentionKind::Dsa);
    m.hidden_size = 6144;
    m.moe_intermediate_size = 2048;
    m.n_routed_experts = 256;
    m.experts_per_token = 8;
  } else {
    fail("unknown model '{}': give a directory with config.json or one of: {}", n,
         fmt::format("{}", fmt::join(plan_model_names(), ", ")));
  }
  return m;
}

int get_int(const nlohmann::json& j, const char* k, const std::string& file) {
  DSA_CHECK(j.contains(k) && j[k].is_number_integer(), "{}: field '{}' missing or not an integer", file, k);
  return j[k].get<int>();
}

PlanModel from_config_json(const std::filesystem::path& dir) {
  auto file = (dir / "config.json").string();
  std::ifstream in(file);
  DSA_CHECK(in.good(), "{}: cannot be read", file);
  nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
  DSA_CHECK(!j.is_discarded() && j.is_object(), "{}: not a JSON object", file);
  DSA_CHECK(j.contains("model_type") && j["model_type"].is_string(), "{}: no model_type", file);
  PlanModel m;
  m.name = dir.string();
  m.model_type = j["model_type"].get<std::string>();
  m.num_heads = get_int(j, "num_attention_heads", file);
  m.index_topk = get_int(j, "index_topk", file);
  m.hidden_size = get_int(j, "hidden_size", file);
  m.moe_intermediate_size = get_int(j, "moe_intermediate_size", file);
  m.n_routed_experts = get_int(j, "n_routed_experts", file);
  m.experts_per_token = get_int(j, "num_experts_per_tok", file);
  int layers = get_int(j, "num_hidden_layers", file);
  if (m.model_type == "deepseek_v4") {
    m.d_qk = get_int(j, "head_dim", file);
    m.d_v = m.d_qk;
    m.sliding_window = j.value("sliding_window", 0);
    DSA_CHECK(j.contains("compress_ratios") && j["compress_ratios"].is_array(), "{}: no compress_ratios array", file);
    auto ratios = j["compress_ratios"].get<std::vector<int>>();
    DSA_CHECK(static_cast<int>(ratios.size()) >= layers, "{}: compress_ratios has {} entries for {} layers", file,
              ratios.size(), layers);
    ratios.resize(layers);  // trailing entries belong to MTP layers
    m.layer_kinds = v4_kinds(ratios, m.name);
  } else if (m.model_type == "glm_moe_dsa") {
    m.d_qk = get_int(j, "kv_lora_rank", file) + get_int(j, "qk_rope_head_dim", file);
    m.d_v = get_int(j, "kv_lora_rank", file);
    m.layer_kinds.assign(layers, AttentionKind::Dsa);
  } else {
    fail("{}: model_type '{}' is not deepseek_v4 or glm_moe_dsa", file, m.model_type);
  }
  return m;
}

}  // namespace

std::vector<std::string> plan_model_names() { return {"deepseek-v4-flash", "deepseek-v4-pro", "glm-5.1"}; }

PlanModel load_plan_model(const std::string& name_or_dir) {
  std::error_code ec;
  PlanModel m = std::filesystem::is_directory(name_or_dir, ec) ? from_config_json(name_or_dir) : builtin(name_or_dir);
  m.validate();
  return m;
}

}  // namespace dsa::tune
