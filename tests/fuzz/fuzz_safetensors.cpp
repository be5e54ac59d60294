// Fuzz target: the safetensors header parser and the checkpoint index (weight_map) parser. The
// first byte picks the parser (even: header, odd: index); the rest is the file.
#include <string_view>

#include "dsa/core/error.h"
#include "dsa/model/checkpoint.h"
#include "dsa/model/safetensors.h"
#include "fuzz_target.h"

DSA_FUZZ_TARGET(safetensors) {
  if (size == 0) return 0;
  const uint8_t* p = data + 1;
  const size_t n = size - 1;
  try {
    if (data[0] % 2 == 0) {
      const dsa::SafetensorsHeader h = dsa::parse_safetensors("fuzz", p, n);
      for (const auto& e : h.entries)  // an accepted entry lies inside the input
        if (e.begin > e.end || h.data_start + e.end > n) __builtin_trap();
    } else {
      const auto map = dsa::parse_checkpoint_index(std::string_view(reinterpret_cast<const char*>(p), n), "fuzz");
      for (const auto& [tensor, file] : map)  // accepted shard names stay in the directory
        if (file.empty() || file.find('/') != std::string::npos || file == "..") __builtin_trap();
    }
  } catch (const dsa::Error&) {
  }
  return 0;
}
