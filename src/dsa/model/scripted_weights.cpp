#include "dsa/model/scripted_weights.h"

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>
#include <vector>

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "dsa/core/dtype_conv.h"
#include "dsa/core/error.h"
#include "dsa/model/checkpoint.h"

namespace dsa::model {
namespace {

bool ends_with(const std::string& s, const std::string& suf) {
  return s.size() >= suf.size() && s.compare(s.size() - suf.size(), suf.size(), suf) == 0;
}

// The weights (not their scales) whose product is a sub-layer's contribution to the residual.
bool is_output_projection(const std::string& n, bool v4) {
  if (v4) return ends_with(n, ".attn.wo_b.weight") || ends_with(n, ".w2.weight");
  return ends_with(n, ".o_proj.weight") || ends_with(n, ".down_proj.weight");
}

float to_f32(const Tensor& t, int64_t i) {
  return t.dtype() == DType::F32 ? t.data<float>()[i] : bf16_bits_to_f32(t.data<uint16_t>()[i]);
}

void set(Tensor& t, int64_t i, float v) {
  if (t.dtype() == DType::F32) t.data<float>()[i] = v;
  else t.data<uint16_t>()[i] = f32_to_bf16_bits(v);
}

// Rewrites every shard of the checkpoint in `dir`: each tensor copied, then `edit(name, t)`; the
// new files are written beside the old ones and renamed over them (the mapping of an old file
// stays valid until `ck` goes away).
template <typename Edit>
void rewrite_shards(Checkpoint& ck, Edit edit) {
  std::vector<std::pair<std::string, std::string>> written;
  for (const auto& f : ck.files()) {
    std::vector<std::pair<std::string, Tensor>> out;
    for (const SafetensorsEntry& e : f->entries()) {
      Tensor t = Tensor::empty(e.shape, e.dtype);
      t.copy_from(f->tensor(e));
      edit(e.name, t);
      out.emplace_back(e.name, std::move(t));
    }
    const std::string tmp = f->path() + ".scripted";
    write_safetensors(tmp, out, f->metadata());
    written.emplace_back(tmp, f->path());
  }
  for (const auto& [tmp, path] : written) std::filesystem::rename(tmp, path);
}

nlohmann::json read_config(const std::string& dir) {
  const auto cfg_path = std::filesystem::path(dir) / "config.json";
  const nlohmann::json cfg = nlohmann::json::parse(std::ifstream(cfg_path), nullptr, false);
  DSA_CHECK(cfg.is_object() && cfg.contains("model_type"), "{}: no model_type", cfg_path.string());
  return cfg;
}

}  // namespace

void apply_predicting_mtp(const std::string& dir) {
  const nlohmann::json cfg = read_config(dir);
  const bool v4 = cfg["model_type"] == "deepseek_v4";
  const int64_t mtp = cfg.value("num_nextn_predict_layers", 0);
  DSA_CHECK(mtp > 0, "scripted MTP: {} has no MTP layer (num_nextn_predict_layers = {})", dir, mtp);
  const std::string p = v4 ? "mtp.0." : fmt::format("model.layers.{}.", cfg.value("num_hidden_layers", 0));
  const std::string in_proj = v4 ? p + "e_proj.weight" : p + "eh_proj.weight";
  const std::set<std::string> ones = v4 ? std::set<std::string>{p + "enorm.weight", p + "norm.weight"}
                                        : std::set<std::string>{p + "enorm.weight", p + "shared_head.norm.weight"};
  Checkpoint ck = Checkpoint::open(dir);
  DSA_CHECK(ck.has(in_proj), "scripted MTP: {} has no {}", dir, in_proj);
  rewrite_shards(ck, [&](const std::string& name, Tensor& t) {
    if (name == in_proj) {  // identity on the first `rows` columns (the embedding half), 0 elsewhere
      t.fill_bytes(0);
      const int64_t rows = t.shape()[0], cols = t.shape()[1];
      for (int64_t i = 0; i < rows; ++i) {
        if (t.dtype() == DType::E4M3)
          t.data<uint8_t>()[i * cols + i] = f32_to_e4m3(1.f);
        else
          set(t, i * cols + i, 1.f);
      }
    } else if (v4 && name == p + "e_proj.scale") {  // block scales 1 (UE8M0 127 = 2^0)
      for (int64_t i = 0; i < t.numel(); ++i) {
        if (t.dtype() == DType::F32)
          t.data<float>()[i] = 1.f;
        else
          t.data<uint8_t>()[i] = 127;
      }
    } else if (v4 && name == p + "h_proj.weight") {
      t.fill_bytes(0);
    } else if (ones.count(name)) {
      for (int64_t i = 0; i < t.numel(); ++i) set(t, i, 1.f);
    }
  });
}

void apply_scripted_weights(const std::string& dir, const std::map<int32_t, int32_t>& next, double margin, uint64_t seed) {
  const nlohmann::json cfg = read_config(dir);
  const bool v4 = cfg["model_type"] == "deepseek_v4";
  const std::string embed_name = v4 ? "embed.weight" : "model.embed_tokens.weight";
  const std::string head_name = v4 ? "head.weight" : "lm_head.weight";
  const std::string norm_name = v4 ? "norm.weight" : "model.norm.weight";

  Checkpoint ck = Checkpoint::open(dir);
  const Tensor embed = ck.get(embed_name);
  const int64_t V = embed.shape()[0], H = embed.shape()[1];
  for (const auto& [from, to] : next)
    DSA_CHECK(from >= 0 && from < V && to >= 0 && to < V, "scripted weights: token {} -> {} is outside the vocabulary of {}",
              from, to, V);

  // The new LM head: noise, plus margin/sqrt(H) * unit(embedding of each predecessor).
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> noise(0.f, 0.01f);
  std::vector<float> head(static_cast<size_t>(V * H));
  for (auto& x : head) x = noise(rng);
  std::map<int32_t, bool> cleared;
  for (const auto& [from, to] : next) {
    double n2 = 0;
    for (int64_t k = 0; k < H; ++k) n2 += double(to_f32(embed, from * H + k)) * to_f32(embed, from * H + k);
    DSA_CHECK(n2 > 0, "scripted weights: token {} has a zero embedding", from);
    float* row = &head[static_cast<size_t>(to) * H];
    if (!cleared[to]) {
      std::fill(row, row + H, 0.f);
      cleared[to] = true;
    }
    const double s = margin / std::sqrt(double(H)) / std::sqrt(n2);
    for (int64_t k = 0; k < H; ++k) row[k] += static_cast<float>(s * to_f32(embed, from * H + k));
  }

  rewrite_shards(ck, [&](const std::string& name, Tensor& t) {
    if (is_output_projection(name, v4)) {
      t.fill_bytes(0);  // 0 in bf16, e4m3 and e2m1 alike (their scales stay)
    } else if (name == norm_name) {
      for (int64_t i = 0; i < t.numel(); ++i) set(t, i, 1.f);
    } else if (name == head_name) {
      for (int64_t i = 0; i < t.numel(); ++i) set(t, i, head[static_cast<size_t>(i)]);
    }
  });
}

}  // namespace dsa::model
