// Python's text behaviour for the Jinja engine: str() and repr() of values (what `{{ x }}`
// prints), float repr (shortest round-trip digits, scientific below 1e-4 and from 1e16),
// json.dumps (the `tojson` filter of Hugging Face templates: ensure_ascii, indent, separators,
// sort_keys), and the code-point view of UTF-8 strings that len(), indexing, slicing and
// whitespace splitting need. Case mapping (upper, lower, title) is ASCII-only.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "dsa/chat/jinja/value.h"

namespace dsa::jinja {

std::string py_str(const Value& v);   // str(v); undefined -> ""
std::string py_repr(const Value& v);  // repr(v)
std::string float_repr(double x);     // repr(float)
std::string int_str(int64_t x);

struct JsonOptions {
  bool ensure_ascii = false;
  std::optional<std::string> indent;  // unset: one line; else the indent unit (spaces or the string given)
  std::string item_sep = ", ", key_sep = ": ";
  bool sort_keys = false;
};
std::string json_dumps(const Value& v, const JsonOptions& o);  // throws TemplateError for non-JSON values

// UTF-8 <-> code points (invalid bytes decode as U+FFFD, as Python's errors="replace").
std::vector<uint32_t> to_code_points(std::string_view s);
std::string from_code_points(const uint32_t* cp, size_t n);
void append_utf8(std::string& out, uint32_t cp);
size_t code_point_count(std::string_view s);
bool is_ascii(std::string_view s);

bool py_isspace(uint32_t cp);  // str.isspace() per code point
std::string py_strip(std::string_view s, const std::optional<std::string>& chars, bool left, bool right);
std::vector<std::string> py_split(std::string_view s, const std::optional<std::string>& sep, int64_t maxsplit);
std::vector<std::string> py_rsplit(std::string_view s, const std::optional<std::string>& sep, int64_t maxsplit);
std::vector<std::string> py_splitlines(std::string_view s, bool keepends);
std::string py_replace(std::string_view s, std::string_view old, std::string_view repl, int64_t count);
std::string ascii_lower(std::string_view s);
std::string ascii_upper(std::string_view s);
std::string py_title(std::string_view s);       // str.title()
std::string py_capitalize(std::string_view s);  // str.capitalize()
std::string html_escape(std::string_view s);    // & < > " ' as markupsafe escapes them

}  // namespace dsa::jinja
