// A Jinja template engine for chat templates, written to render Hugging Face chat templates as
// Python's jinja2 does under transformers (ImmutableSandboxedEnvironment, trim_blocks and
// lstrip_blocks on, loopcontrols, the `generation` tag, Hugging Face's tojson, raise_exception
// and strftime_now). What it covers and how: lexer.h (whitespace control), parser.h (grammar,
// statements), builtins.h (filters, tests, methods, globals), value.h and py_text.h (Python
// semantics of values and their printing).
//
// Not supported, each an error naming the template line: include/import/extends, call blocks,
// recursive loops, *args/**kwargs in calls, str.format specs, \N{...} escapes. Case mapping is
// ASCII-only. Rendering is bounded (output size, steps, call depth): a hostile template ends in
// an error, not a hang.
#pragma once
#include <memory>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "dsa/chat/jinja/ast.h"
#include "dsa/chat/jinja/lexer.h"
#include "dsa/chat/jinja/template_error.h"
#include "dsa/chat/jinja/value.h"

namespace dsa::jinja {

struct RenderLimits {
  size_t max_output_bytes = size_t{64} << 20;
  int64_t max_steps = 20'000'000;  // statements, loop iterations and calls
  int max_call_depth = 64;         // nested macro calls
};

class Template {
 public:
  // Parses `source`; throws TemplateError naming the line of a syntax error.
  explicit Template(std::string_view source, const LexOptions& lex = {});
  // Renders with the variables of `context` (a JSON object; key order kept). Thread-safe.
  std::string render(const nlohmann::ordered_json& context, const RenderLimits& limits = {}) const;
  std::string render(const Value& context, const RenderLimits& limits = {}) const;  // a dict Value

 private:
  std::shared_ptr<const Body> body_;
};

// Parse and render in one call (the entry point a fuzzer drives). Throws TemplateError (a
// dsa::Error) with the line for every problem of the template or its rendering.
std::string render(std::string_view template_text, const nlohmann::ordered_json& context);

}  // namespace dsa::jinja
