// Tests (`x is name`) with jinja2's definitions (list in builtins.h).
#include <algorithm>
#include <cmath>

#include "dsa/chat/jinja/builtins.h"
#include "dsa/chat/jinja/py_text.h"
#include "dsa/chat/jinja/template_error.h"

namespace dsa::jinja {
namespace {

const Value& other(const CallArgs& a, const char* test) {
  if (a.pos.empty()) raise("test '{}' needs an argument", test);
  return a.pos[0];
}

using Test = bool (*)(const Value&, CallArgs&);
#define TEST(...) [](const Value& v, CallArgs& a) -> bool __VA_ARGS__

const std::vector<std::pair<const char*, Test>>& table() {
  static const std::vector<std::pair<const char*, Test>> t = {
      {"defined", TEST({ (void)a; return !v.is_undefined(); })},
      {"undefined", TEST({ (void)a; return v.is_undefined(); })},
      {"none", TEST({ (void)a; return v.is_none(); })},
      {"boolean", TEST({ (void)a; return v.is_bool(); })},
      {"true", TEST({ (void)a; return v.is_bool() && v.as_bool(); })},
      {"false", TEST({ (void)a; return v.is_bool() && !v.as_bool(); })},
      {"integer", TEST({ (void)a; return v.is_int(); })},
      {"float", TEST({ (void)a; return v.is_float(); })},
      {"number", TEST({ (void)a; return v.is_number(); })},
      {"string", TEST({ (void)a; return v.is_string(); })},
      {"mapping", TEST({ (void)a; return v.is_dict(); })},
      // Python iter() / len()+__getitem__ succeed on these (jinja2's Undefined included).
      {"iterable", TEST({ (void)a; return v.is_undefined() || v.is_string() || v.is_list() || v.is_dict(); })},
      {"sequence", TEST({ (void)a; return v.is_undefined() || v.is_string() || v.is_list() || v.is_dict(); })},
      {"callable", TEST({ (void)a; return v.is_callable(); })},
      {"escaped", TEST({ (void)v; (void)a; return false; })},
      {"lower", TEST({ (void)a; const std::string s = py_str(v); return s != ascii_upper(s) && s == ascii_lower(s); })},
      {"upper", TEST({ (void)a; const std::string s = py_str(v); return s != ascii_lower(s) && s == ascii_upper(s); })},
      {"even", TEST({
         (void)a;
         if (!v.is_number()) raise("test 'even' needs a number, got {}", v.type_name());
         return v.is_float() ? std::fmod(v.as_float(), 2.0) == 0 : v.as_int() % 2 == 0;
       })},
      {"odd", TEST({
         (void)a;
         if (!v.is_number()) raise("test 'odd' needs a number, got {}", v.type_name());
         return v.is_float() ? std::fabs(std::fmod(v.as_float(), 2.0)) == 1 : v.as_int() % 2 != 0;
       })},
      {"divisibleby", TEST({
         const Value& n = other(a, "divisibleby");
         if (!v.is_number() || !n.is_number()) raise("test 'divisibleby' needs numbers");
         if (n.as_number() == 0) raise("integer division or modulo by zero");
         if (v.is_float() || n.is_float()) return std::fmod(v.as_number(), n.as_number()) == 0;
         return v.as_int() % n.as_int() == 0;
       })},
      {"eq", TEST({ return equal(v, other(a, "eq")); })},
      {"ne", TEST({ return !equal(v, other(a, "ne")); })},
      {"lt", TEST({ return compare(v, other(a, "lt")) < 0; })},
      {"le", TEST({ return compare(v, other(a, "le")) <= 0; })},
      {"gt", TEST({ return compare(v, other(a, "gt")) > 0; })},
      {"ge", TEST({ return compare(v, other(a, "ge")) >= 0; })},
      {"in", TEST({ return contains(other(a, "in"), v); })},
      {"sameas", TEST({
         const Value& o = other(a, "sameas");
         if (v.kind() != o.kind()) return false;
         if (v.is_none() || v.is_undefined()) return true;
         if (v.is_bool()) return v.as_bool() == o.as_bool();
         if (v.is_list()) return &v.list_obj() == &o.list_obj();
         if (v.is_callable()) return &v.callable() == &o.callable();
         if (v.is_dict() || v.is_namespace()) return &v.dict_obj() == &o.dict_obj();
         return equal(v, o);  // Python's `is` on small ints and interned strings
       })},
      {"filter", TEST({ (void)a; return v.is_string() && has_filter(v.str()); })},
      {"test", TEST({ (void)a; return v.is_string() && has_test(v.str()); })},
  };
  return t;
}

#undef TEST

Test find(const std::string& name) {
  static const std::pair<const char*, const char*> alias[] = {
      {"==", "eq"}, {"equalto", "eq"}, {"!=", "ne"}, {"<", "lt"}, {"lessthan", "lt"}, {"<=", "le"},
      {">", "gt"},  {"greaterthan", "gt"}, {">=", "ge"}};
  std::string n = name;
  for (const auto& [k, target] : alias)
    if (n == k) n = target;
  for (const auto& [k, f] : table())
    if (n == k) return f;
  return nullptr;
}

}  // namespace

bool has_test(const std::string& name) { return find(name) != nullptr; }

bool apply_test(const std::string& name, const Value& v, CallArgs& args) {
  Test f = find(name);
  if (!f) raise("no test named '{}'", name);
  return f(v, args);
}

}  // namespace dsa::jinja
