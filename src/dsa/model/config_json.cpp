// config.json -> ModelConfig. Accepts three spellings of the same facts:
//  - the official checkpoint config.json (deepseek-ai/DeepSeek-V4-*, zai-org/GLM-5*): HF-style
//    names plus `compress_ratios` (one per layer, trailing entries for MTP layers), `rope_scaling`
//    (YaRN of the compressed branches), `quantization_config`, top-level `expert_dtype`;
//  - DeepSeek's inference `ModelArgs` names (dim, n_layers, n_heads, window_size, route_scale,
//    rope_factor, original_seq_len, n_mtp_layers, ...);
//  - transformers 5.17 (configuration_deepseek_v4.py / configuration_glm_moe_dsa.py):
//    `layer_types` + `compress_rates`, `mlp_layer_types` (hash_moe / dense), `rope_parameters`
//    (flat or nested {main, compress}), `partial_rotary_factor`, `indexer_types` /
//    `index_topk_pattern` / `index_topk_freq` + `index_skip_topk_offset`.
// Fields that are absent take the defaults of transformers' config classes (which are the
// V4-Flash and GLM-5 values); the shape-defining fields are required. Errors name the file, the
// field and its value.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <optional>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "dsa/core/error.h"
#include "dsa/core/log.h"
#include "dsa/model/config.h"
#include "dsa/model/config_bounds.h"

namespace dsa::model {

namespace {

using json = nlohmann::json;

// A JSON value for an error message: invalid UTF-8 replaced (dump() would throw on it) and
// long values cut, so that a hostile file cannot make the message itself fail or explode.
std::string show(const json& v) {
  std::string s = v.dump(-1, ' ', false, json::error_handler_t::replace);
  if (s.size() > 200) s = s.substr(0, 197) + "...";
  return s;
}

class Fields {
 public:
  Fields(const json& obj, std::string source, std::string prefix = "")
      : obj_(obj), source_(std::move(source)), prefix_(std::move(prefix)) {}

  const std::string& source() const { return source_; }
  std::string path(std::string_view name) const { return prefix_ + std::string(name); }

  [[noreturn]] void bad(std::string_view name, const json& v, std::string_view why) const {
    fail("{}: field '{}' = {}: {}", source_, path(name), show(v), why);
  }

  // The first of `names` that is present and not null; when two aliases are both present they
  // must agree. Returns {name, value} or nullopt.
  std::optional<std::pair<std::string, const json*>> find(std::initializer_list<std::string_view> names) const {
    std::optional<std::pair<std::string, const json*>> hit;
    for (auto n : names) {
      auto it = obj_.find(std::string(n));
      if (it == obj_.end() || it->is_null()) continue;
      if (!hit) {
        hit.emplace(std::string(n), &*it);
      } else if (*hit->second != *it) {
        fail("{}: fields '{}' = {} and '{}' = {} disagree", source_, path(hit->first), show(*hit->second), path(n),
             show(*it));
      }
    }
    return hit;
  }

  // An integer (an integral float such as 4.0 too). Values outside int64 are an error, never a
  // cast (a float-to-integer conversion out of range is undefined behaviour).
  std::optional<int64_t> opt_int(std::initializer_list<std::string_view> names) const {
    auto h = find(names);
    if (!h) return std::nullopt;
    const json& v = *h->second;
    if (v.is_number_unsigned()) {
      if (v.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) bad(h->first, v, "out of range");
      return static_cast<int64_t>(v.get<uint64_t>());
    }
    if (v.is_number_integer()) return v.get<int64_t>();
    if (v.is_number_float()) {
      const double d = v.get<double>();
      if (!(std::fabs(d) < 0x1p62)) bad(h->first, v, "out of range");
      if (d == std::trunc(d)) return static_cast<int64_t>(d);
    }
    bad(h->first, v, "expected an integer");
  }
  int64_t req_int(std::initializer_list<std::string_view> names) const {
    auto v = opt_int(names);
    if (!v) missing(names);
    return *v;
  }
  // Integers stored as int: outside int32 is "out of range" here; the sane bounds of each field
  // are ModelConfig::validate()'s (config_bounds.h).
  int int_or(std::initializer_list<std::string_view> names, int def) const {
    auto h = find(names);
    auto v = opt_int(names);
    if (!v) return def;
    if (*v < INT32_MIN || *v > INT32_MAX) bad(h->first, *h->second, "out of range");
    return static_cast<int>(*v);
  }
  int req_int32(std::initializer_list<std::string_view> names) const {
    auto v = req_int(names);
    if (v < 0 || v > INT32_MAX) bad(find(names)->first, *find(names)->second, "out of range");
    return static_cast<int>(v);
  }
  // A count that sizes lists while parsing (layers): checked against [lo, hi] at once.
  int count_or(std::initializer_list<std::string_view> names, int def, int lo, int hi, bool required = false) const {
    auto h = find(names);
    if (!h) {
      if (required) missing(names);
      return def;
    }
    const int64_t v = *opt_int(names);
    if (v < lo || v > hi) bad(h->first, *h->second, fmt::format("must be in {}..{}", lo, hi));
    return static_cast<int>(v);
  }
  std::optional<double> opt_double(std::initializer_list<std::string_view> names) const {
    auto h = find(names);
    if (!h) return std::nullopt;
    if (!h->second->is_number()) bad(h->first, *h->second, "expected a number");
    return h->second->get<double>();
  }
  double double_or(std::initializer_list<std::string_view> names, double def) const {
    return opt_double(names).value_or(def);
  }
  std::optional<std::string> opt_string(std::initializer_list<std::string_view> names) const {
    auto h = find(names);
    if (!h) return std::nullopt;
    if (!h->second->is_string()) bad(h->first, *h->second, "expected a string");
    return h->second->get<std::string>();
  }
  std::string string_or(std::initializer_list<std::string_view> names, std::string def) const {
    return opt_string(names).value_or(std::move(def));
  }
  bool bool_or(std::initializer_list<std::string_view> names, bool def) const {
    auto h = find(names);
    if (!h) return def;
    if (!h->second->is_boolean()) bad(h->first, *h->second, "expected true or false");
    return h->second->get<bool>();
  }
  // An object field, as a nested Fields (errors then name "outer.inner").
  std::optional<Fields> opt_object(std::initializer_list<std::string_view> names) const {
    auto h = find(names);
    if (!h) return std::nullopt;
    if (!h->second->is_object()) bad(h->first, *h->second, "expected an object");
    return Fields(*h->second, source_, path(h->first) + ".");
  }
  std::optional<std::pair<std::string, std::vector<int>>> opt_int_list(std::initializer_list<std::string_view> names) const {
    auto h = find(names);
    if (!h) return std::nullopt;
    if (!h->second->is_array()) bad(h->first, *h->second, "expected a list of integers");
    std::vector<int> out;
    for (size_t i = 0; i < h->second->size(); ++i) {
      const json& e = (*h->second)[i];
      if (!e.is_number_integer() || (e.is_number_unsigned() && e.get<uint64_t>() > INT32_MAX) ||
          (!e.is_number_unsigned() && (e.get<int64_t>() < INT32_MIN || e.get<int64_t>() > INT32_MAX)))
        bad(fmt::format("{}[{}]", h->first, i), e, "expected an integer (32-bit)");
      out.push_back(static_cast<int>(e.get<int64_t>()));
    }
    return std::make_pair(h->first, out);
  }
  std::optional<std::pair<std::string, std::vector<std::string>>> opt_string_list(
      std::initializer_list<std::string_view> names) const {
    auto h = find(names);
    if (!h) return std::nullopt;
    if (!h->second->is_array()) bad(h->first, *h->second, "expected a list of strings");
    std::vector<std::string> out;
    for (size_t i = 0; i < h->second->size(); ++i) {
      const json& e = (*h->second)[i];
      if (!e.is_string()) bad(fmt::format("{}[{}]", h->first, i), e, "expected a string");
      out.push_back(e.get<std::string>());
    }
    return std::make_pair(h->first, out);
  }

  [[noreturn]] void missing(std::initializer_list<std::string_view> names) const {
    std::vector<std::string> p;
    for (auto n : names) p.push_back(path(n));
    fail("{}: required field '{}' is missing (accepted names: {})", source_, p.front(), fmt::join(p, ", "));
  }

 private:
  const json& obj_;
  std::string source_;
  std::string prefix_;
};

// YaRN parameters from one rope dict (official `rope_scaling`, transformers `rope_parameters`
// or `compress_rope_parameters`). Leaves `r` untouched where the dict is silent.
void read_rope_dict(const Fields& f, RopeConfig& r) {
  if (auto t = f.opt_double({"rope_theta"})) r.theta = *t;
  if (auto t = f.opt_string({"rope_type", "type"})) r.type = *t;
  r.factor = f.double_or({"factor"}, r.factor);
  if (auto o = f.opt_int({"original_max_position_embeddings"})) r.original_max_position = *o;
  r.beta_fast = f.double_or({"beta_fast"}, r.beta_fast);
  r.beta_slow = f.double_or({"beta_slow"}, r.beta_slow);
  r.attention_factor = f.double_or({"attention_factor"}, r.attention_factor);
}

void read_quant(const Fields& f, ModelConfig& c) {
  c.quant = QuantConfig{};
  if (auto q = f.opt_object({"quantization_config"})) {
    c.quant.method = q->string_or({"quant_method"}, "fp8");
    c.quant.fmt = q->string_or({"fmt"}, "e4m3");
    // No scale_fmt: fp32 scales (`weight_scale_inv`), as GLM's FP8 checkpoints ship them.
    c.quant.scale_fmt = q->string_or({"scale_fmt"}, "float32");
    if (auto b = q->opt_int_list({"weight_block_size"})) {
      if (b->second.size() != 2) q->bad(b->first, json(b->second), "expected [n, k]");
      c.quant.block_n = b->second[0];
      c.quant.block_k = b->second[1];
    }
  } else if (auto d = f.opt_string({"dtype"}); d && *d == "fp8") {  // inference ModelArgs
    c.quant.method = "fp8";
    c.quant.scale_fmt = f.string_or({"scale_fmt"}, "float32");
  } else {
    c.quant.method = "none";
  }
  c.quant.expert_dtype = f.string_or({"expert_dtype"}, c.quant.method == "none" ? "bf16" : "fp8");
}

void parse_deepseek_v4(const Fields& f, ModelConfig& c) {
  c.hidden_size = f.req_int32({"hidden_size", "dim"});
  c.num_layers = f.count_or({"num_hidden_layers", "n_layers"}, 0, 1, bounds::kMaxLayers, /*required=*/true);
  c.num_heads = f.req_int32({"num_attention_heads", "n_heads"});
  c.vocab_size = f.req_int32({"vocab_size"});
  c.num_kv_heads = f.int_or({"num_key_value_heads"}, 1);
  c.max_position_embeddings = f.opt_int({"max_position_embeddings"}).value_or(1048576);
  c.rms_norm_eps = f.double_or({"rms_norm_eps", "norm_eps"}, 1e-6);
  c.tie_word_embeddings = f.bool_or({"tie_word_embeddings"}, false);
  c.head_dim = f.int_or({"head_dim"}, 512);
  if (f.find({"qk_rope_head_dim", "rope_head_dim"})) {
    c.qk_rope_head_dim = f.int_or({"qk_rope_head_dim", "rope_head_dim"}, 64);
  } else if (auto p = f.opt_double({"partial_rotary_factor"})) {
    if (!(*p > 0 && *p <= 1)) f.bad("partial_rotary_factor", json(*p), "must be in (0, 1]");
    c.qk_rope_head_dim = static_cast<int>(c.head_dim * *p);  // as transformers: int(head_dim * factor)
  } else {
    c.qk_rope_head_dim = 64;
  }
  c.qk_nope_head_dim = c.head_dim - c.qk_rope_head_dim;
  if (auto n = f.opt_int({"qk_nope_head_dim"}); n && *n != c.qk_nope_head_dim)
    f.bad("qk_nope_head_dim", json(*n),
          fmt::format("must equal head_dim ({}) - qk_rope_head_dim ({})", c.head_dim, c.qk_rope_head_dim));
  c.v_head_dim = c.head_dim;
  c.kv_lora_rank = 0;
  c.q_lora_rank = f.int_or({"q_lora_rank"}, 1024);
  c.o_groups = f.int_or({"o_groups"}, 8);
  c.o_lora_rank = f.int_or({"o_lora_rank"}, 1024);
  c.sliding_window = f.int_or({"sliding_window", "window_size"}, 128);

  // Per-layer attention schedule: official/ModelArgs `compress_ratios` (num_layers entries, plus
  // one per MTP layer in the official files) or transformers `layer_types` + `compress_rates`.
  std::vector<int> ratios;
  std::string ratios_field;
  if (auto cr = f.opt_int_list({"compress_ratios"})) {
    ratios = cr->second;
    ratios_field = cr->first;
  } else if (auto lt = f.opt_string_list({"layer_types"})) {
    std::map<std::string, int> rates = {{"sliding_attention", 0},
                                        {"compressed_sparse_attention", f.int_or({"compress_rate_csa"}, 4)},
                                        {"heavily_compressed_attention", f.int_or({"compress_rate_hca"}, 128)}};
    if (auto cr = f.opt_object({"compress_rates"})) {
      for (const char* k : {"compressed_sparse_attention", "heavily_compressed_attention"})
        rates[k] = cr->int_or({k}, rates[k]);
    }
    for (size_t i = 0; i < lt->second.size(); ++i) {
      auto it = rates.find(lt->second[i]);
      if (it == rates.end())
        f.bad(fmt::format("layer_types[{}]", i), json(lt->second[i]),
              "expected sliding_attention, compressed_sparse_attention or heavily_compressed_attention");
      ratios.push_back(it->second);
    }
    ratios_field = lt->first;
  } else {
    f.missing({"compress_ratios", "layer_types"});
  }
  if (static_cast<int>(ratios.size()) < c.num_layers)
    f.bad(ratios_field, json(ratios),
          fmt::format("has {} entries, need one per layer (num_hidden_layers = {})", ratios.size(), c.num_layers));
  const int extra = static_cast<int>(ratios.size()) - c.num_layers;
  // The official files carry one trailing entry per MTP layer; without num_nextn_predict_layers
  // those entries are the MTP count.
  c.num_mtp_layers = f.count_or({"num_nextn_predict_layers", "n_mtp_layers"}, std::min(extra, bounds::kMaxMtpLayers),
                                0, bounds::kMaxMtpLayers);
  c.compress_ratios.assign(ratios.begin(), ratios.begin() + c.num_layers);
  if (extra == 0) {
    c.mtp_compress_ratios.assign(c.num_mtp_layers, 0);  // MTP layers are sliding-only
  } else if (extra >= c.num_mtp_layers) {
    c.mtp_compress_ratios.assign(ratios.begin() + c.num_layers, ratios.begin() + c.num_layers + c.num_mtp_layers);
    // Release configs keep the MTP layer's entry even where a conversion dropped the MTP layer
    // (num_nextn_predict_layers 0): entries beyond the layers present are not used.
    if (extra > c.num_mtp_layers)
      log_info("{}: {} has {} entries; the {} beyond num_hidden_layers ({}) + num_nextn_predict_layers ({}) are "
               "ignored",
               f.source(), ratios_field, ratios.size(), extra - c.num_mtp_layers, c.num_layers, c.num_mtp_layers);
  } else {
    f.bad(ratios_field, json(ratios),
          fmt::format("has {} entries: expected num_hidden_layers ({}) or num_hidden_layers + MTP layers ({})",
                      ratios.size(), c.num_layers, c.num_layers + c.num_mtp_layers));
  }

  c.index_n_heads = f.int_or({"index_n_heads"}, 64);
  c.index_head_dim = f.int_or({"index_head_dim"}, 128);
  c.index_topk = f.int_or({"index_topk"}, 512);
  c.n_routed_experts = f.int_or({"n_routed_experts", "num_local_experts"}, 256);
  c.num_experts_per_tok = f.int_or({"num_experts_per_tok", "n_activated_experts"}, 6);
  c.n_shared_experts = f.int_or({"n_shared_experts"}, 1);
  c.moe_intermediate_size = f.int_or({"moe_intermediate_size", "moe_inter_dim"}, 2048);
  c.routed_scaling_factor = f.double_or({"routed_scaling_factor", "route_scale"}, 1.5);
  c.scoring_func = f.string_or({"scoring_func", "score_func"}, "sqrtsoftplus");
  c.topk_method = f.string_or({"topk_method"}, "noaux_tc");
  c.n_group = f.int_or({"n_group"}, 1);
  c.topk_group = f.int_or({"topk_group"}, 1);
  c.norm_topk_prob = f.bool_or({"norm_topk_prob"}, true);
  c.swiglu_limit = f.double_or({"swiglu_limit"}, 10.0);
  if (f.find({"num_hash_layers", "n_hash_layers"})) {
    c.num_hash_layers = f.int_or({"num_hash_layers", "n_hash_layers"}, 0);
  } else if (auto m = f.opt_string_list({"mlp_layer_types"})) {
    c.num_hash_layers = 0;
    while (c.num_hash_layers < static_cast<int>(m->second.size()) && m->second[c.num_hash_layers] == "hash_moe")
      ++c.num_hash_layers;
    for (size_t i = c.num_hash_layers; i < m->second.size(); ++i)
      if (m->second[i] != "moe")
        f.bad(fmt::format("{}[{}]", m->first, i), json(m->second[i]),
              "expected leading 'hash_moe' entries followed by 'moe'");
  } else {
    c.num_hash_layers = 3;
  }
  c.hc_mult = f.int_or({"hc_mult"}, 4);
  c.hc_sinkhorn_iters = f.int_or({"hc_sinkhorn_iters"}, 20);
  c.hc_eps = f.double_or({"hc_eps"}, 1e-6);
  c.rope_interleave = f.bool_or({"rope_interleave"}, true);

  // RoPE. Plain layers: rope_theta, no scaling. Compressed branches: compress_rope_theta with the
  // YaRN parameters, attention factor 1 (the reference applies no mscale).
  c.rope = RopeConfig{f.double_or({"rope_theta"}, 10000.0), "default"};
  c.compress_rope = RopeConfig{f.double_or({"compress_rope_theta"}, 160000.0), "default"};
  if (auto rs = f.opt_object({"rope_scaling"})) read_rope_dict(*rs, c.compress_rope);
  if (auto rp = f.opt_object({"rope_parameters"})) {
    if (auto main = rp->opt_object({"main"})) read_rope_dict(*main, c.rope);
    if (auto comp = rp->opt_object({"compress"})) {
      read_rope_dict(*comp, c.compress_rope);
    } else if (!rp->opt_object({"main"})) {
      // Flat transformers form: the YaRN keys belong to the compressed branches; its rope_theta
      // (when present) is the main theta.
      RopeConfig flat = c.compress_rope;
      read_rope_dict(*rp, flat);
      if (auto t = rp->opt_double({"rope_theta"})) c.rope.theta = *t;
      flat.theta = c.compress_rope.theta;
      c.compress_rope = flat;
    }
  }
  if (auto cp = f.opt_object({"compress_rope_parameters"})) read_rope_dict(*cp, c.compress_rope);
  if (auto orig = f.opt_int({"original_seq_len"}); orig && *orig > 0) {  // inference ModelArgs
    c.compress_rope.type = "yarn";
    c.compress_rope.original_max_position = *orig;
    c.compress_rope.factor = f.double_or({"rope_factor"}, c.compress_rope.factor);
  }
  if (c.compress_rope.type == "yarn") c.compress_rope.attention_factor = 1.0;
  read_quant(f, c);
}

void parse_glm_moe_dsa(const Fields& f, ModelConfig& c) {
  c.hidden_size = f.req_int32({"hidden_size"});
  c.num_layers = f.count_or({"num_hidden_layers"}, 0, 1, bounds::kMaxLayers, /*required=*/true);
  c.num_heads = f.req_int32({"num_attention_heads"});
  c.vocab_size = f.req_int32({"vocab_size"});
  c.num_kv_heads = f.int_or({"num_key_value_heads"}, c.num_heads);
  c.num_mtp_layers = f.count_or({"num_nextn_predict_layers"}, 0, 0, bounds::kMaxMtpLayers);
  c.max_position_embeddings = f.opt_int({"max_position_embeddings"}).value_or(202752);
  c.rms_norm_eps = f.double_or({"rms_norm_eps"}, 1e-5);
  c.tie_word_embeddings = f.bool_or({"tie_word_embeddings"}, false);
  c.q_lora_rank = f.int_or({"q_lora_rank"}, 2048);
  c.kv_lora_rank = f.int_or({"kv_lora_rank"}, 512);
  c.qk_nope_head_dim = f.int_or({"qk_nope_head_dim"}, 192);
  c.qk_rope_head_dim = f.int_or({"qk_rope_head_dim"}, 64);
  c.v_head_dim = f.int_or({"v_head_dim"}, 256);
  // transformers writes head_dim = qk_rope_head_dim (its rotary reads head_dim); the query/key
  // width is qk_head_dim = nope + rope.
  c.head_dim = c.qk_nope_head_dim + c.qk_rope_head_dim;
  if (auto q = f.opt_int({"qk_head_dim"}); q && *q != c.head_dim)
    f.bad("qk_head_dim", json(*q),
          fmt::format("must equal qk_nope_head_dim ({}) + qk_rope_head_dim ({})", c.qk_nope_head_dim,
                      c.qk_rope_head_dim));
  c.sliding_window = 0;
  c.index_n_heads = f.int_or({"index_n_heads"}, 32);
  c.index_head_dim = f.int_or({"index_head_dim"}, 128);
  c.index_topk = f.int_or({"index_topk"}, 2048);

  // indexer_types > index_topk_pattern ("FSS..." or list) > index_topk_freq / index_skip_topk_offset.
  std::string types_field;
  if (auto it = f.opt_string_list({"indexer_types"})) {
    c.indexer_types = it->second;
    types_field = it->first;
  } else if (auto p = f.find({"index_topk_pattern"})) {
    const json& v = *p->second;
    if (v.is_string()) {
      for (char ch : v.get<std::string>()) {
        if (ch != 'F' && ch != 'S') f.bad(p->first, v, "pattern letters must be F (full) or S (shared)");
        c.indexer_types.push_back(ch == 'F' ? "full" : "shared");
      }
    } else if (auto l = f.opt_string_list({"index_topk_pattern"})) {
      c.indexer_types = l->second;
    }
    types_field = p->first;
  } else {
    int freq = std::max(f.int_or({"index_topk_freq"}, 1), 1);
    int offset = f.int_or({"index_skip_topk_offset"}, 2);
    for (int i = 0; i < c.num_layers; ++i)
      c.indexer_types.push_back(std::max(int64_t{i} - offset + 1, int64_t{0}) % freq == 0 ? "full" : "shared");
  }
  // As for DeepSeek-V4's compress_ratios: entries beyond the layers present are not used.
  if (static_cast<int>(c.indexer_types.size()) > c.num_layers) {
    log_info("{}: {} has {} entries; the {} beyond num_hidden_layers ({}) are ignored", f.source(), types_field,
             c.indexer_types.size(), c.indexer_types.size() - c.num_layers, c.num_layers);
    c.indexer_types.resize(static_cast<size_t>(c.num_layers));
  }

  c.n_routed_experts = f.int_or({"n_routed_experts", "num_experts"}, 256);
  c.num_experts_per_tok = f.int_or({"num_experts_per_tok"}, 8);
  c.n_shared_experts = f.int_or({"n_shared_experts"}, 1);
  c.moe_intermediate_size = f.int_or({"moe_intermediate_size"}, 2048);
  c.intermediate_size = f.int_or({"intermediate_size"}, 12288);
  if (f.find({"first_k_dense_replace"})) {
    c.first_k_dense_replace = f.int_or({"first_k_dense_replace"}, 0);
  } else if (auto m = f.opt_string_list({"mlp_layer_types"})) {
    c.first_k_dense_replace = 0;
    while (c.first_k_dense_replace < static_cast<int>(m->second.size()) && m->second[c.first_k_dense_replace] == "dense")
      ++c.first_k_dense_replace;
    for (size_t i = c.first_k_dense_replace; i < m->second.size(); ++i)
      if (m->second[i] != "sparse")
        f.bad(fmt::format("{}[{}]", m->first, i), json(m->second[i]),
              "expected leading 'dense' entries followed by 'sparse'");
  } else {
    c.first_k_dense_replace = 3;
  }
  c.routed_scaling_factor = f.double_or({"routed_scaling_factor"}, 2.5);
  c.scoring_func = f.string_or({"scoring_func"}, "sigmoid");
  c.topk_method = f.string_or({"topk_method"}, "noaux_tc");
  c.n_group = f.int_or({"n_group"}, 1);
  c.topk_group = f.int_or({"topk_group"}, 1);
  c.norm_topk_prob = f.bool_or({"norm_topk_prob"}, true);
  c.rope_interleave = f.bool_or({"rope_interleave"}, true);
  c.rope = RopeConfig{f.double_or({"rope_theta"}, 1e6), "default"};
  if (auto rp = f.opt_object({"rope_parameters"})) read_rope_dict(*rp, c.rope);
  if (auto rs = f.opt_object({"rope_scaling"})) read_rope_dict(*rs, c.rope);
  read_quant(f, c);
}

}  // namespace

ModelConfig parse_model_config_json(std::string_view text, const std::string& source) {
  json root;
  try {
    root = json::parse(text);
  } catch (const json::exception& e) {  // parse errors and number overflow (1e400)
    fail("{}: not valid JSON: {}", source, e.what());
  }
  if (!root.is_object()) fail("{}: expected a JSON object at the top level", source);
  Fields f(root, source);

  ModelConfig c;
  c.name = source;
  std::optional<std::string> type = f.opt_string({"model_type"});
  if (!type) {
    // DeepSeek's inference config (ModelArgs names) carries no model_type.
    if (auto a = f.find({"architectures"}); a && a->second->is_array() && !a->second->empty()) {
      std::string arch = (*a->second)[0].is_string() ? (*a->second)[0].get<std::string>() : "";
      if (arch == "DeepseekV4ForCausalLM") type = "deepseek_v4";
      if (arch == "GlmMoeDsaForCausalLM") type = "glm_moe_dsa";
    }
    if (!type && f.find({"compress_ratios"}) && f.find({"hc_mult"})) type = "deepseek_v4";
    if (!type) fail("{}: required field 'model_type' is missing (expected deepseek_v4 or glm_moe_dsa)", source);
  }
  if (*type == "deepseek_v4") {
    c.arch = Arch::DeepseekV4;
    parse_deepseek_v4(f, c);
  } else if (*type == "glm_moe_dsa") {
    c.arch = Arch::GlmMoeDsa;
    parse_glm_moe_dsa(f, c);
  } else {
    fail("{}: field 'model_type' = \"{}\": not supported (dsa runs deepseek_v4 and glm_moe_dsa)", source, *type);
  }
  c.validate();
  return c;
}

}  // namespace dsa::model
