// Shared helpers of the KV tests: tiny model configs, their attention plans on the CPU platform,
// and the slot formula (docs/kv-cache.md) written out independently.
#pragma once
#include <cstdint>
#include <vector>

#include "dsa/attention/plan.h"
#include "dsa/engine/batch.h"
#include "dsa/engine/kv_manager.h"
#include "dsa/model/config.h"

namespace dsa::engine::test {

// DeepSeek-V4 Flash shapes with few layers: main layers with `ratios` (0 / 4 / 128) + one sliding MTP layer.
model::ModelConfig tiny_v4(std::vector<int> ratios);
// GLM-5.1 shapes with few layers and the given indexer types (+ one MTP layer).
model::ModelConfig tiny_glm(std::vector<std::string> indexer_types);

std::vector<attn::LayerPlan> cpu_plan(const model::ModelConfig& config, int block_size);
std::vector<CacheGroupSpec> groups_of(const model::ModelConfig& config, int block_size);
int group_index(const KvManager& kv, const char* name);  // fails the test when absent

// block_table[r][i / P] * P + i % P, -1 for i < 0, a block past the row or a negative entry.
int64_t reference_slot(const GroupMetadata& g, int64_t r, int64_t i);

// Batch of `count` tokens (no ids) of request id from `start`.
Batch positions_batch(RequestId id, int64_t start, int64_t count);

}  // namespace dsa::engine::test
