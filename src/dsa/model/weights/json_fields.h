// Typed field readers for config.json used by the weight-spec dimension parsers: errors name the
// field and the value found.
#pragma once
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "dsa/core/error.h"

namespace dsa::weights {

// An integer field; `def` when absent (or an error when `required`).
inline int64_t get_i(const nlohmann::json& c, const char* key, int64_t def, bool required) {
  auto it = c.find(key);
  if (it == c.end() || it->is_null()) {
    DSA_CHECK(!required, "config.json: field '{}' is missing", key);
    return def;
  }
  DSA_CHECK(it->is_number_integer(), "config.json: field '{}' must be an integer, got {}", key, it->dump());
  return it->get<int64_t>();
}

// A string field, or "" when absent; other JSON types are an error naming the field.
inline std::string get_s(const nlohmann::json& c, const char* key) {
  auto it = c.find(key);
  if (it == c.end() || it->is_null()) return "";
  DSA_CHECK(it->is_string(), "config.json: field '{}' must be a string, got {}", key, it->dump());
  return it->get<std::string>();
}

}  // namespace dsa::weights
