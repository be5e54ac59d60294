#include "dsa/model/config.h"

#include <cmath>
#include <filesystem>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "dsa/core/error.h"
#include "dsa/core/regular_file.h"
#include "dsa/model/config_bounds.h"

namespace dsa::model {

std::string_view arch_name(Arch a) { return a == Arch::DeepseekV4 ? "deepseek_v4" : "glm_moe_dsa"; }

namespace {

// Throws "<model>: field '<field>' = <value>: <why>".
template <typename V>
void require(bool ok, const ModelConfig& c, std::string_view field, const V& value, std::string_view why) {
  if (!ok) fail("{}: field '{}' = {}: {}", c.name, field, value, why);
}

// An integer field within [lo, hi] (bounds from config_bounds.h).
void in_range(const ModelConfig& c, std::string_view field, int64_t v, int64_t lo, int64_t hi) {
  require(v >= lo && v <= hi, c, field, v, fmt::format("must be in {}..{}", lo, hi));
}

// A finite real in (0, hi] (or [0, hi] when zero_ok).
void positive(const ModelConfig& c, std::string_view field, double v, double hi, bool zero_ok = false) {
  require(std::isfinite(v) && (zero_ok ? v >= 0 : v > 0) && v <= hi, c, field, v,
          fmt::format("must be finite and in {}{}, {}]", zero_ok ? "[" : "(", 0, hi));
}

void validate_rope(const ModelConfig& c, const RopeConfig& r, std::string_view field) {
  positive(c, fmt::format("{}.theta", field), r.theta, bounds::kMaxRopeTheta);
  require(r.type == "default" || r.type == "yarn", c, fmt::format("{}.type", field), r.type,
          "must be 'default' or 'yarn'");
  if (r.type == "yarn") {
    positive(c, fmt::format("{}.factor", field), r.factor, bounds::kMaxScale);
    in_range(c, fmt::format("{}.original_max_position_embeddings", field), r.original_max_position, 1,
             bounds::kMaxPositions);
    require(std::isfinite(r.beta_fast) && std::isfinite(r.beta_slow) && std::abs(r.beta_fast) <= bounds::kMaxScale &&
                std::abs(r.beta_slow) <= bounds::kMaxScale,
            c, fmt::format("{}.beta_fast/beta_slow", field), fmt::format("{}/{}", r.beta_fast, r.beta_slow),
            fmt::format("must be finite, at most {} in magnitude", bounds::kMaxScale));
    positive(c, fmt::format("{}.attention_factor", field), r.attention_factor, bounds::kMaxScale);
  }
}

}  // namespace

void ModelConfig::validate() const {
  namespace b = bounds;
  const ModelConfig& c = *this;
  in_range(c, "hidden_size", hidden_size, 1, b::kMaxHidden);
  in_range(c, "num_hidden_layers", num_layers, 1, b::kMaxLayers);
  in_range(c, "num_nextn_predict_layers", num_mtp_layers, 0, b::kMaxMtpLayers);
  in_range(c, "num_attention_heads", num_heads, 1, b::kMaxHeads);
  in_range(c, "num_key_value_heads", num_kv_heads, 1, b::kMaxHeads);
  in_range(c, "vocab_size", vocab_size, 1, b::kMaxVocab);
  in_range(c, "max_position_embeddings", max_position_embeddings, 1, b::kMaxPositions);
  positive(c, "rms_norm_eps", rms_norm_eps, 1.0);
  in_range(c, "head_dim", head_dim, 1, b::kMaxHeadDim);
  in_range(c, "qk_nope_head_dim", qk_nope_head_dim, 0, b::kMaxHeadDim);
  require(qk_rope_head_dim > 0 && qk_rope_head_dim <= head_dim && qk_rope_head_dim % 2 == 0, c, "qk_rope_head_dim",
          qk_rope_head_dim, fmt::format("must be even and in 1..head_dim ({})", head_dim));
  require(head_dim == qk_nope_head_dim + qk_rope_head_dim, c, "head_dim", head_dim,
          fmt::format("must equal qk_nope_head_dim ({}) + qk_rope_head_dim ({})", qk_nope_head_dim, qk_rope_head_dim));
  in_range(c, "v_head_dim", v_head_dim, 1, b::kMaxHeadDim);
  in_range(c, "q_lora_rank", q_lora_rank, 1, b::kMaxRank);
  in_range(c, "n_routed_experts", n_routed_experts, 1, b::kMaxExperts);
  require(num_experts_per_tok > 0 && num_experts_per_tok <= n_routed_experts &&
              num_experts_per_tok <= b::kMaxExpertsPerTok,
          c, "num_experts_per_tok", num_experts_per_tok,
          fmt::format("must be in 1..n_routed_experts ({}) and at most {}", n_routed_experts, b::kMaxExpertsPerTok));
  in_range(c, "n_shared_experts", n_shared_experts, 0, b::kMaxSharedExperts);
  in_range(c, "moe_intermediate_size", moe_intermediate_size, 1, b::kMaxIntermediate);
  positive(c, "routed_scaling_factor", routed_scaling_factor, b::kMaxScale);
  positive(c, "swiglu_limit", swiglu_limit, b::kMaxScale, /*zero_ok=*/true);
  require(topk_method == "noaux_tc", c, "topk_method", topk_method, "dsa routes with noaux_tc only");
  require(n_group >= 1 && n_group <= n_routed_experts && n_routed_experts % n_group == 0, c, "n_group", n_group,
          fmt::format("must divide n_routed_experts ({})", n_routed_experts));
  require(topk_group >= 1 && topk_group <= n_group, c, "topk_group", topk_group,
          fmt::format("must be in 1..n_group ({})", n_group));
  in_range(c, "index_n_heads", index_n_heads, 1, b::kMaxHeads);
  in_range(c, "index_head_dim", index_head_dim, 1, b::kMaxHeadDim);
  in_range(c, "index_topk", index_topk, 1, b::kMaxIndexTopk);
  validate_rope(c, rope, "rope");

  require(quant.method == "none" || quant.method == "fp8", c, "quantization_config.quant_method", quant.method,
          "supported: fp8 (or no quantization_config for bf16 weights)");
  if (quant.method == "fp8") {
    require(quant.fmt == "e4m3", c, "quantization_config.fmt", quant.fmt, "only e4m3 is supported");
    require(quant.scale_fmt == "ue8m0" || quant.scale_fmt == "float32", c, "quantization_config.scale_fmt",
            quant.scale_fmt, "supported: ue8m0, float32");
    require(quant.block_n > 0 && quant.block_k > 0 && quant.block_n <= b::kMaxQuantBlock &&
                quant.block_k <= b::kMaxQuantBlock,
            c, "quantization_config.weight_block_size", fmt::format("[{}, {}]", quant.block_n, quant.block_k),
            fmt::format("both must be in 1..{}", b::kMaxQuantBlock));
  }
  require(quant.expert_dtype == "fp8" || quant.expert_dtype == "fp4" || quant.expert_dtype == "bf16", c,
          "expert_dtype", quant.expert_dtype, "supported: fp8, fp4, bf16");

  if (arch == Arch::DeepseekV4) {
    require(v_head_dim == head_dim, c, "v_head_dim", v_head_dim,
            fmt::format("DeepSeek-V4 uses the same 512-wide latent as K and V: must equal head_dim ({})", head_dim));
    require(scoring_func == "sqrtsoftplus", c, "scoring_func", scoring_func,
            "DeepSeek-V4 routes with sqrtsoftplus scores (the only one dsa implements for it)");
    require(static_cast<int>(compress_ratios.size()) == num_layers, c, "compress_ratios",
            fmt::format("{} entries", compress_ratios.size()),
            fmt::format("need one per layer (num_hidden_layers = {})", num_layers));
    require(static_cast<int>(mtp_compress_ratios.size()) == num_mtp_layers, c, "compress_ratios (MTP)",
            fmt::format("{} entries", mtp_compress_ratios.size()),
            fmt::format("need one per MTP layer (num_nextn_predict_layers = {})", num_mtp_layers));
    for (size_t i = 0; i < compress_ratios.size() + mtp_compress_ratios.size(); ++i) {
      int r = i < compress_ratios.size() ? compress_ratios[i] : mtp_compress_ratios[i - compress_ratios.size()];
      require(r == 0 || r == 4 || r == 128, c, fmt::format("compress_ratios[{}]", i), r,
              "must be 0 (sliding), 4 (CSA) or 128 (HCA)");
    }
    in_range(c, "sliding_window", sliding_window, 1, b::kMaxSlidingWindow);
    // The grouped output projection splits the concatenated heads [H * head_dim] into o_groups.
    require(o_groups > 0 && o_groups <= b::kMaxOGroups && (int64_t{num_heads} * head_dim) % o_groups == 0, c,
            "o_groups", o_groups,
            fmt::format("must divide num_attention_heads * head_dim ({})", int64_t{num_heads} * head_dim));
    in_range(c, "o_lora_rank", o_lora_rank, 1, b::kMaxRank);
    in_range(c, "hc_mult", hc_mult, 1, b::kMaxHcMult);
    in_range(c, "hc_sinkhorn_iters", hc_sinkhorn_iters, 1, b::kMaxSinkhornIters);
    positive(c, "hc_eps", hc_eps, 1.0);
    require(num_hash_layers >= 0 && num_hash_layers <= num_layers, c, "num_hash_layers", num_hash_layers,
            fmt::format("must be in 0..num_hidden_layers ({})", num_layers));
    validate_rope(c, compress_rope, "compress_rope");
  } else {
    in_range(c, "kv_lora_rank", kv_lora_rank, 1, b::kMaxRank);
    require(scoring_func == "sigmoid", c, "scoring_func", scoring_func,
            "GLM-5 routes with sigmoid scores (the only one dsa implements for it)");
    require(static_cast<int>(indexer_types.size()) == num_layers, c, "indexer_types",
            fmt::format("{} entries", indexer_types.size()),
            fmt::format("need one per layer (num_hidden_layers = {})", num_layers));
    for (size_t i = 0; i < indexer_types.size(); ++i)
      require(indexer_types[i] == "full" || indexer_types[i] == "shared", c, fmt::format("indexer_types[{}]", i),
              indexer_types[i], "must be 'full' or 'shared'");
    require(indexer_types.empty() || indexer_types[0] == "full", c, "indexer_types[0]",
            indexer_types.empty() ? std::string() : indexer_types[0],
            "the first layer must run the indexer ('shared' reuses a previous full layer's top-k)");
    require(first_k_dense_replace >= 0 && first_k_dense_replace <= num_layers, c, "first_k_dense_replace",
            first_k_dense_replace, fmt::format("must be in 0..num_hidden_layers ({})", num_layers));
    in_range(c, "intermediate_size", intermediate_size, 0, b::kMaxIntermediate);
    require(first_k_dense_replace == 0 || intermediate_size > 0, c, "intermediate_size", intermediate_size,
            "dense layers need intermediate_size > 0");
  }
}

std::vector<attn::AttentionLayerSpec> ModelConfig::attention_layers() const {
  using attn::CacheRole;
  using attn::CacheSpec;
  using attn::LayerKind;
  std::vector<attn::AttentionLayerSpec> out;
  if (arch == Arch::DeepseekV4) {
    struct KindInfo {
      LayerKind kind;
      int ratio;
    };
    for (KindInfo k : {KindInfo{LayerKind::Sliding, 0}, KindInfo{LayerKind::Csa, 4}, KindInfo{LayerKind::Hca, 128}}) {
      attn::AttentionLayerSpec s;
      s.kind = k.kind;
      for (int r : compress_ratios) s.num_layers += r == k.ratio;
      for (int r : mtp_compress_ratios) s.num_mtp_layers += r == k.ratio;
      if (s.num_layers + s.num_mtp_layers == 0) continue;
      const int n = s.num_layers + s.num_mtp_layers;
      s.num_heads = num_heads;
      s.head_size = head_dim;
      s.v_head_size = head_dim;
      s.window = sliding_window;
      s.compress_ratio = k.ratio;
      s.topk = k.kind == LayerKind::Csa ? index_topk : 0;
      s.attends_all_compressed = k.kind == LayerKind::Hca;
      s.sink = true;
      s.model_kv_dtype = attn::KvCacheDtype::Fp8Model1;
      s.caches.push_back(CacheSpec{CacheRole::SlidingWindow, 1, true, true, n});
      if (k.ratio > 0) s.caches.push_back(CacheSpec{CacheRole::Compressed, k.ratio, true, false, n});
      if (k.kind == LayerKind::Csa) s.caches.push_back(CacheSpec{CacheRole::IndexerKeys, k.ratio, false, false, n});
      out.push_back(std::move(s));
    }
  } else {
    attn::AttentionLayerSpec s;
    s.kind = LayerKind::MlaSparse;
    s.num_layers = num_layers;
    s.num_mtp_layers = num_mtp_layers;
    s.num_heads = num_heads;
    s.head_size = kv_lora_rank + qk_rope_head_dim;  // absorbed: queries live in the latent space
    s.v_head_size = kv_lora_rank;
    s.topk = index_topk;
    s.sink = false;
    s.model_kv_dtype = attn::KvCacheDtype::Fp8DsMla;
    int full = num_mtp_layers;  // each MTP layer runs its own indexer
    for (const auto& t : indexer_types) full += t == "full";
    s.caches.push_back(CacheSpec{CacheRole::Latent, 1, true, false, num_layers + num_mtp_layers});
    s.caches.push_back(CacheSpec{CacheRole::IndexerKeys, 1, false, false, full});
    out.push_back(std::move(s));
  }
  return out;
}

float ModelConfig::softmax_scale() const {
  int d = arch == Arch::DeepseekV4 ? head_dim : qk_nope_head_dim + qk_rope_head_dim;
  return static_cast<float>(1.0 / std::sqrt(static_cast<double>(d)));
}

ModelConfig load_model_config(const std::string& name_or_path) {
  if (is_builtin_model(name_or_path)) return builtin_model_config(name_or_path);
  namespace fs = std::filesystem;
  fs::path p(name_or_path);
  // path_kind follows symlinks; a loop or an unreadable path is an error naming it.
  if (path_kind(p.string()) == PathKind::Directory) p /= "config.json";
  const PathKind k = path_kind(p.string());
  if (k == PathKind::Missing)
    fail("model '{}' is neither a built-in ({}) nor a checkpoint directory with config.json nor a .json file",
         name_or_path, fmt::join(builtin_model_names(), ", "));
  // read_regular_file refuses a FIFO or device in place of config.json, and bounds the size.
  return parse_model_config_json(read_regular_file(p.string(), kMaxConfigFileBytes), p.string());
}

}  // namespace dsa::model
