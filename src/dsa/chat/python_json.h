// JSON text as Python's json.dumps(x, ensure_ascii=False) writes it (", " and ": " separators,
// float repr, key order kept): what model prompt formats were trained on, unlike nlohmann's
// compact dump().
#pragma once
#include <string>

#include <nlohmann/json.hpp>

#include "dsa/chat/jinja/py_text.h"

namespace dsa::chat {

inline std::string python_json(const nlohmann::ordered_json& j) {
  return jinja::json_dumps(jinja::Value::from_json(j), jinja::JsonOptions{});
}

}  // namespace dsa::chat
