// The engine's built-in library, with jinja2's names and Python's behaviour:
//  - filters (`x | name(args)`): abs attr batch capitalize center count d default dictsort e
//    escape first float forceescape format indent int items join last length list lower map max
//    min reject rejectattr replace reverse round safe select selectattr sort string sum title
//    tojson (Hugging Face's: ensure_ascii=False, indent, separators, sort_keys) trim unique
//    upper wordcount;
//  - tests (`x is name(args)`): boolean callable defined divisibleby eq equalto escaped even
//    false filter float ge greaterthan gt in integer iterable le lessthan lower lt mapping ne
//    none number odd sameas sequence string test true undefined upper == != < <= > >=;
//  - methods of str, dict and list values (`s.strip()`, `d.items()`, ...); the sandbox's
//    mutating methods (list.append, dict.update, ...) are unsafe, as in Hugging Face's
//    ImmutableSandboxedEnvironment;
//  - globals: range (at most 100000 items), namespace, dict, cycler, joiner, raise_exception,
//    strftime_now (Hugging Face's chat-template globals).
// Each throws TemplateError for bad arguments; the caller adds the line.
#pragma once
#include <initializer_list>
#include <string>

#include "dsa/chat/jinja/value.h"

namespace dsa::jinja {

bool has_filter(const std::string& name);
Value apply_filter(const std::string& name, const Value& v, CallArgs& args);
bool has_test(const std::string& name);
bool apply_test(const std::string& name, const Value& v, CallArgs& args);
// A bound method of obj, or undefined (with jinja2's message) when obj has none of that name.
Value get_method(const Value& obj, const std::string& name);
Value make_globals();  // dict of the global names

// Helpers shared by the built-ins.
[[noreturn]] void raise_undefined(const Value& u);  // the error a misused undefined raises
ValueList iterate(const Value& v);                   // Python iter(): list items, dict keys, str chars
bool contains(const Value& container, const Value& item);  // Python `item in container`
Value getattr(const Value& obj, const std::string& name);   // jinja2's environment.getattr
Value getitem(const Value& obj, const Value& key);          // jinja2's environment.getitem

// Argument access: positional i, else keyword `name`, else `def`.
Value arg(const CallArgs& a, size_t i, const char* name, const Value& def = Value());
// Throws when more than max_pos positional arguments or a keyword outside `names` are given.
void check_args(const CallArgs& a, const char* fn, size_t max_pos, std::initializer_list<const char*> names);

}  // namespace dsa::jinja
