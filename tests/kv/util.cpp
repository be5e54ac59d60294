#include "util.h"

#include <gtest/gtest.h>

#include "dsa/attention/registry.h"
#include "dsa/model/cache_specs.h"

namespace dsa::kv::test {

model::ModelConfig tiny_v4(std::vector<int> ratios) {
  model::ModelConfig c = model::builtin_model_config("deepseek-v4-flash");
  c.name = "tiny-v4";
  c.num_layers = static_cast<int>(ratios.size());
  c.compress_ratios = std::move(ratios);
  c.num_hash_layers = std::min(c.num_hash_layers, c.num_layers);
  c.num_mtp_layers = 1;
  c.mtp_compress_ratios = {0};
  c.validate();
  return c;
}

model::ModelConfig tiny_glm(std::vector<std::string> indexer_types) {
  model::ModelConfig c = model::builtin_model_config("glm-5.1");
  c.name = "tiny-glm";
  c.num_layers = static_cast<int>(indexer_types.size());
  c.indexer_types = std::move(indexer_types);
  c.first_k_dense_replace = std::min(c.first_k_dense_replace, c.num_layers);
  c.num_mtp_layers = 1;
  c.validate();
  return c;
}

std::vector<attn::LayerPlan> cpu_plan(const model::ModelConfig& config, int block_size) {
  static attn::AttentionBackendRegistry registry = [] {
    attn::AttentionBackendRegistry r;
    attn::register_builtin_attention_backends(r);
    return r;
  }();
  attn::PlanOptions opt;
  opt.capability = std::nullopt;  // CPU platform
  opt.block_size = block_size;
  opt.select.read_env = false;
  opt.select.log = false;
  return attn::plan_attention(config.attention_layers(), opt, registry);
}

std::vector<CacheGroupSpec> groups_of(const model::ModelConfig& config, int block_size) {
  return model::kv_cache_groups(config, cpu_plan(config, block_size));
}

KvRequirements reqs_of(const model::ModelConfig& config, int block_size) { return reqs_of(groups_of(config, block_size), block_size); }

KvRequirements reqs_of(std::vector<CacheGroupSpec> groups, int block_size) {
  KvRequirements r;
  r.groups = std::move(groups);
  r.block_size = block_size;
  return r;
}

int group_index(const KvManager& kv, const char* name) {
  for (size_t g = 0; g < kv.groups().size(); ++g)
    if (kv.groups()[g].name == name) return static_cast<int>(g);
  ADD_FAILURE() << "no cache group " << name;
  return 0;
}

int64_t reference_slot(const GroupMetadata& g, int64_t r, int64_t i) {
  if (i < 0) return -1;
  const int64_t width = g.block_table.size(1);
  const int64_t b = i / g.page_size;
  if (b >= width) return -1;
  const int32_t page = g.block_table.data<int32_t>()[r * width + b];
  if (page < 0) return -1;
  return static_cast<int64_t>(page) * g.page_size + i % g.page_size;
}

Batch positions_batch(RequestId id, int64_t start, int64_t count) {
  Batch b;
  b.add_positions(id, start, count);
  return b;
}

}  // namespace dsa::kv::test
