// Tiny checkpoints for the engine tests (`dsa make-tiny --arch glm_moe_dsa|deepseek_v4 --seed 1`),
// written once per test process into temp dirs removed at exit, and a CPU CausalLM loaded from
// them; plus seeded random prompts.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "dsa/model/causal_lm.h"

namespace dsa::engine::test {

const std::string& tiny_model_dir(const std::string& arch);  // "glm_moe_dsa" or "deepseek_v4"
std::unique_ptr<model::CausalLM> load_tiny_lm(const std::string& arch);  // MTP layer loaded

// Sets top-level fields of the config.json in checkpoint directory `dir` (a tiny checkpoint
// with another context, top-k, ...).
void set_config_fields(const std::string& dir, const nlohmann::json& fields);

// Prompts of the given lengths with ids in [2, vocab) (0 and 1 avoided: 1 is the tiny eos).
std::vector<std::vector<int32_t>> random_prompts(const std::vector<int64_t>& lengths, int64_t vocab, uint64_t seed);

// Greedy tokens of one prompt driven directly through the CausalLM (prefill in one forward, then
// one forward per token), as `dsa generate` does: the engine's reference.
std::vector<int32_t> greedy_direct(model::CausalLM& lm, const std::vector<int32_t>& prompt, int64_t max_tokens);

}  // namespace dsa::engine::test
