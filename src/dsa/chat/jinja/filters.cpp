// Filters with jinja2's signatures and behaviour (list in builtins.h).
#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <utility>

#include "dsa/chat/jinja/builtins.h"
#include "dsa/chat/jinja/operators.h"
#include "dsa/chat/jinja/py_text.h"
#include "dsa/chat/jinja/template_error.h"

namespace dsa::jinja {
namespace {

int64_t length_of(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::Undefined: return 0;
    case Value::Kind::String: return static_cast<int64_t>(code_point_count(v.str()));
    case Value::Kind::List:
      if (v.is_generator()) raise("object of type 'generator' has no len()");
      return static_cast<int64_t>(v.items().size());
    case Value::Kind::Dict: return static_cast<int64_t>(v.dict_obj().items.size());
    default: raise("object of type '{}' has no len()", v.type_name());
  }
}

// jinja2's make_attrgetter: "a.b.0" looks up each part as an item (integer parts as indices).
Value attr_path(const Value& v, const Value& attribute, const Value& def = Value()) {
  Value cur = v;
  if (attribute.is_int()) return getitem(cur, attribute);
  if (!attribute.is_string()) raise("attribute must be a string, not {}", attribute.type_name());
  const std::string& path = attribute.str();
  size_t b = 0;
  for (;;) {
    const size_t e = path.find('.', b);
    const std::string part = path.substr(b, e == std::string::npos ? std::string::npos : e - b);
    const bool numeric = !part.empty() && std::all_of(part.begin(), part.end(), [](char c) { return c >= '0' && c <= '9'; });
    cur = getitem(cur, numeric ? Value(static_cast<int64_t>(std::stoll(part))) : Value(part));
    if (cur.is_undefined() && !def.is_undefined()) return def;
    if (e == std::string::npos) return cur;
    b = e + 1;
  }
}

// Markup in, Markup out (jinja2's string filters return Markup for Markup input).
Value keep_markup(const Value& in, std::string out) { return in.is_markup() ? Value::markup(std::move(out)) : Value(std::move(out)); }

Value lower_if_string(const Value& v, bool case_sensitive) {
  return !case_sensitive && v.is_string() ? Value(ascii_lower(v.str())) : v;
}

void sort_values(ValueList& items, const std::function<Value(const Value&)>& key, bool reverse) {
  std::vector<std::pair<Value, Value>> keyed;
  keyed.reserve(items.size());
  for (const Value& x : items) keyed.emplace_back(key(x), x);
  std::stable_sort(keyed.begin(), keyed.end(), [&](const auto& a, const auto& b) {
    return reverse ? compare(b.first, a.first) < 0 : compare(a.first, b.first) < 0;
  });
  for (size_t i = 0; i < items.size(); ++i) items[i] = std::move(keyed[i].second);
}

bool parse_int(const std::string& s0, int64_t base, int64_t& out) {
  std::string s = py_strip(s0, std::nullopt, true, true), clean;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '_' && i > 0 && i + 1 < s.size()) continue;
    clean += s[i];
  }
  if (clean.empty()) return false;
  char* end = nullptr;
  errno = 0;
  const long long v = std::strtoll(clean.c_str(), &end, static_cast<int>(base));
  if (errno || *end != 0) return false;
  out = v;
  return true;
}

bool parse_float(const std::string& s0, double& out) {
  const std::string s = py_strip(s0, std::nullopt, true, true);
  if (s.empty()) return false;
  char* end = nullptr;
  out = std::strtod(s.c_str(), &end);
  return *end == 0;
}

// A keyword-only argument (undefined when not given).
Value kwarg(const CallArgs& a, const char* name) {
  for (const auto& [k, v] : a.kw)
    if (k == name) return v;
  return Value();
}

// Filter/test name and its remaining arguments for map/select-style filters.
CallArgs shift(const CallArgs& a, size_t from) {
  CallArgs r;
  for (size_t i = from; i < a.pos.size(); ++i) r.pos.push_back(a.pos[i]);
  r.kw = a.kw;
  return r;
}

Value select_impl(const Value& v, const CallArgs& a, bool attr, bool keep) {
  ValueList out;
  if (!v.truthy()) return Value::generator({});  // jinja2 skips a false input (None, undefined, [])
  const size_t first = attr ? 1 : 0;
  if (attr && a.pos.empty()) raise("{}: an attribute name is required", keep ? "selectattr" : "rejectattr");
  for (const Value& x : iterate(v)) {
    const Value subject = attr ? attr_path(x, a.pos[0]) : x;
    bool ok;
    if (a.pos.size() > first) {
      const Value& t = a.pos[first];
      if (!t.is_string()) raise("test name must be a string");
      CallArgs rest = shift(a, first + 1);
      ok = apply_test(t.str(), subject, rest);
    } else {
      ok = subject.truthy();
    }
    if (ok == keep) out.push_back(x);
  }
  return Value::generator(std::move(out));
}

Value minmax(const Value& v, const CallArgs& a, bool is_max) {
  check_args(a, is_max ? "max" : "min", 2, {"case_sensitive", "attribute"});
  const bool cs = arg(a, 0, "case_sensitive", Value(false)).truthy();
  const Value attribute = arg(a, 1, "attribute", Value::none());
  const ValueList items = iterate(v);
  if (items.empty()) return Value::undefined("No aggregated item, sequence was empty.");
  auto key = [&](const Value& x) { return lower_if_string(attribute.is_none() ? x : attr_path(x, attribute), cs); };
  size_t best = 0;
  Value bk = key(items[0]);
  for (size_t i = 1; i < items.size(); ++i) {
    Value k = key(items[i]);
    if (is_max ? compare(k, bk) > 0 : compare(k, bk) < 0) {
      best = i;
      bk = std::move(k);
    }
  }
  return items[best];
}

std::string indent_text(const std::string& s0, const Value& width, bool first, bool blank) {
  const std::string ind = width.is_string() ? width.str() : std::string(static_cast<size_t>(std::max<int64_t>(0, width.as_int())), ' ');
  std::vector<std::string> lines = py_splitlines(s0 + "\n", false);
  std::string rv;
  if (blank) {
    for (size_t i = 0; i < lines.size(); ++i) rv += (i ? "\n" + ind : "") + lines[i];
  } else {
    rv = lines.empty() ? "" : lines[0];
    for (size_t i = 1; i < lines.size(); ++i) rv += "\n" + (lines[i].empty() ? lines[i] : ind + lines[i]);
  }
  if (first) rv = ind + rv;
  return rv;
}

Value round_value(const Value& v, const CallArgs& a) {
  check_args(a, "round", 2, {"precision", "method"});
  const int64_t prec = arg(a, 0, "precision", Value(0)).as_int();
  const std::string method = arg(a, 1, "method", Value("common")).str();
  if (!v.is_number()) raise("round: {} is not a number", v.type_name());
  const double x = v.as_number(), p = std::pow(10.0, static_cast<double>(prec));
  if (method == "ceil") return Value(std::ceil(x * p) / p);
  if (method == "floor") return Value(std::floor(x * p) / p);
  if (method != "common") raise("method must be common, ceil or floor");
  if (prec <= 0 || prec > 30) return Value(std::nearbyint(x * p) / p);  // round half to even, as Python
  char buf[128];
  std::snprintf(buf, sizeof buf, "%.*f", static_cast<int>(prec), x);  // correctly rounded from the binary value
  return Value(std::strtod(buf, nullptr));
}

Value tojson(const Value& v, const CallArgs& a) {
  check_args(a, "tojson", 1, {"indent", "ensure_ascii", "separators", "sort_keys"});
  JsonOptions o;
  const Value indent = arg(a, 0, "indent", Value::none());
  if (indent.is_int()) o.indent = std::string(static_cast<size_t>(std::max<int64_t>(0, indent.as_int())), ' ');
  else if (indent.is_string()) o.indent = indent.str();
  else if (!indent.is_none()) raise("tojson: indent must be an integer or a string");
  if (o.indent) o.item_sep = ",";
  o.ensure_ascii = arg(a, 1, "ensure_ascii", Value(false)).truthy();
  const Value sep = arg(a, 2, "separators", Value::none());
  if (!sep.is_none()) {
    if (!sep.is_list() || sep.items().size() != 2 || !sep.items()[0].is_string() || !sep.items()[1].is_string())
      raise("tojson: separators must be a pair of strings");
    o.item_sep = sep.items()[0].str();
    o.key_sep = sep.items()[1].str();
  }
  o.sort_keys = arg(a, 3, "sort_keys", Value(false)).truthy();
  return Value(json_dumps(v, o));
}

using Filter = Value (*)(const Value&, CallArgs&);
#define FILTER(...) [](const Value& v, CallArgs& a) -> Value __VA_ARGS__

const std::vector<std::pair<const char*, Filter>>& table() {
  static const std::vector<std::pair<const char*, Filter>> t = {
      {"abs", FILTER({
         (void)a;
         if (v.is_float()) return Value(std::fabs(v.as_float()));
         if (v.is_int() || v.is_bool()) {
           if (v.as_int() == INT64_MIN) raise("integer result out of the 64-bit range");
           return Value(v.as_int() < 0 ? -v.as_int() : v.as_int());
         }
         raise("bad operand type for abs(): '{}'", v.type_name());
       })},
      {"attr", FILTER({  // Python getattr only: no fallback to dict keys
         const std::string name = py_str(arg(a, 0, "name"));
         if (v.is_undefined()) raise_undefined(v);
         if (v.is_namespace()) return getattr(v, name);
         Value m = get_method(v, name);
         return m.is_undefined() && m.str().empty() ? Value::undefined(fmt::format("'{} object' has no attribute '{}'", v.type_name(), name)) : m;
       })},
      {"batch", FILTER({
         const int64_t n = arg(a, 0, "linecount").as_int();
         if (n <= 0) raise("batch: linecount must be positive");
         const Value fill = arg(a, 1, "fill_with", Value::none());
         ValueList out, cur;
         for (const Value& x : iterate(v)) {
           cur.push_back(x);
           if (static_cast<int64_t>(cur.size()) == n) out.push_back(Value::list(std::exchange(cur, {})));
         }
         if (!cur.empty()) {
           if (!fill.is_none())
             while (static_cast<int64_t>(cur.size()) < n) cur.push_back(fill);
           out.push_back(Value::list(std::move(cur)));
         }
         return Value::generator(std::move(out));
       })},
      {"capitalize", FILTER({ (void)a; return Value(py_capitalize(py_str(v))); })},
      {"center", FILTER({
         CallArgs m;
         m.pos.push_back(arg(a, 0, "width", Value(80)));
         return get_method(Value(py_str(v)), "center").callable().fn(m);
       })},
      {"count", FILTER({ (void)a; return Value(length_of(v)); })},
      {"length", FILTER({ (void)a; return Value(length_of(v)); })},
      {"default", FILTER({
         const Value def = arg(a, 0, "default_value", Value(""));
         const bool boolean = arg(a, 1, "boolean", Value(false)).truthy();
         return v.is_undefined() || (boolean && !v.truthy()) ? def : v;
       })},
      {"dictsort", FILTER({
         check_args(a, "dictsort", 3, {"case_sensitive", "by", "reverse"});
         if (!v.is_dict()) raise("dictsort: expected a dict, got {}", v.type_name());
         const bool cs = arg(a, 0, "case_sensitive", Value(false)).truthy();
         const std::string by = arg(a, 1, "by", Value("key")).str();
         if (by != "key" && by != "value") raise("You can only sort by either \"key\" or \"value\"");
         ValueList items;
         for (const auto& [k, x] : v.dict_obj().items) items.push_back(Value::list({k, x}, true));
         sort_values(items, [&](const Value& p) { return lower_if_string(p.items()[by == "key" ? 0 : 1], cs); },
                     arg(a, 2, "reverse", Value(false)).truthy());
         return Value::list(std::move(items));
       })},
      {"escape", FILTER({ (void)a; return v.is_markup() ? v : Value::markup(html_escape(py_str(v))); })},
      {"forceescape", FILTER({ (void)a; return Value::markup(html_escape(py_str(v))); })},
      {"first", FILTER({
         (void)a;
         const ValueList items = iterate(v);
         return items.empty() ? Value::undefined("No first item, sequence was empty.") : items.front();
       })},
      {"last", FILTER({
         (void)a;
         const ValueList items = iterate(v);
         return items.empty() ? Value::undefined("No last item, sequence was empty.") : items.back();
       })},
      {"float", FILTER({
         const Value def = arg(a, 0, "default", Value(0.0));
         if (v.is_number()) return Value(v.as_number());
         double d;
         if (v.is_string() && parse_float(v.str(), d)) return Value(d);
         return def;
       })},
      {"int", FILTER({
         const Value def = arg(a, 0, "default", Value(0));
         const int64_t base = arg(a, 1, "base", Value(10)).as_int();
         if (v.is_int() || v.is_bool()) return Value(v.as_int());
         if (v.is_float()) {
           if (!std::isfinite(v.as_float()) || std::fabs(v.as_float()) > 9.2e18) return def;
           return Value(static_cast<int64_t>(v.as_float()));
         }
         if (v.is_string()) {
           int64_t i;
           if (parse_int(v.str(), base, i)) return Value(i);
           double d;
           if (parse_float(v.str(), d) && std::isfinite(d) && std::fabs(d) < 9.2e18) return Value(static_cast<int64_t>(d));
         }
         return def;
       })},
      {"format", FILTER({
         if (!a.kw.empty() && !a.pos.empty()) raise("format: can't handle positional and keyword arguments at the same time");
         return Value(printf_format(py_str(v), Value::list(a.pos, true)));
       })},
      {"groupby", FILTER({
         check_args(a, "groupby", 3, {"attribute", "default", "case_sensitive"});
         const Value attribute = arg(a, 0, "attribute");
         const Value def = arg(a, 1, "default", Value::none());
         const bool cs = arg(a, 2, "case_sensitive", Value(false)).truthy();
         ValueList items = iterate(v);
         auto key = [&](const Value& x) { return lower_if_string(attr_path(x, attribute, def.is_none() ? Value() : def), cs); };
         sort_values(items, key, false);
         ValueList groups;
         for (const Value& x : items) {
           const Value k = attr_path(x, attribute, def.is_none() ? Value() : def);
           if (!groups.empty() && equal(lower_if_string(groups.back().items()[0], cs), lower_if_string(k, cs))) {
             groups.back().items()[1].list_obj().items.push_back(x);
           } else {
             groups.push_back(Value::list({k, Value::list({x})}, true));
           }
         }
         return Value::list(std::move(groups));
       })},
      {"indent", FILTER({
         check_args(a, "indent", 3, {"width", "first", "blank"});
         return Value(indent_text(py_str(v), arg(a, 0, "width", Value(4)), arg(a, 1, "first", Value(false)).truthy(),
                                  arg(a, 2, "blank", Value(false)).truthy()));
       })},
      {"items", FILTER({
         (void)a;
         if (v.is_undefined()) return Value::generator({});
         if (!v.is_dict()) raise("items: can only get item pairs from a mapping, not {}", v.type_name());
         ValueList out;
         for (const auto& [k, x] : v.dict_obj().items) out.push_back(Value::list({k, x}, true));
         return Value::generator(std::move(out));
       })},
      {"join", FILTER({
         check_args(a, "join", 2, {"d", "attribute"});
         const std::string d = py_str(arg(a, 0, "d", Value("")));
         const Value attribute = arg(a, 1, "attribute", Value::none());
         std::string out;
         bool first = true;
         for (const Value& x : iterate(v)) {
           if (!first) out += d;
           out += py_str(attribute.is_none() ? x : attr_path(x, attribute));
           first = false;
         }
         return Value(out);
       })},
      {"list", FILTER({ (void)a; return Value::list(iterate(v)); })},
      {"lower", FILTER({ (void)a; return keep_markup(v, ascii_lower(py_str(v))); })},
      {"upper", FILTER({ (void)a; return keep_markup(v, ascii_upper(py_str(v))); })},
      {"title", FILTER({
         (void)a;
         // jinja2's title: words begin after -, whitespace, ( { [ <
         std::string s = py_str(v), o;
         bool start = true;
         for (char c : s) {
           if (c == '-' || c == '(' || c == '{' || c == '[' || c == '<' || c == ' ' || c == '\t' || c == '\n' ||
               c == '\r' || c == '\f' || c == '\v') {
             o += c;
             start = true;
           } else {
             o += start ? static_cast<char>(std::toupper(static_cast<unsigned char>(c)))
                        : static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
             start = false;
           }
         }
         return Value(o);
       })},
      {"map", FILTER({
         ValueList out;
         if (!v.truthy()) return Value::generator({});  // jinja2 skips a false input
         const Value attribute = kwarg(a, "attribute");
         if (!attribute.is_undefined()) {
           const Value def = kwarg(a, "default");
           for (const Value& x : iterate(v)) out.push_back(attr_path(x, attribute, def));
           return Value::generator(std::move(out));
         }
         if (a.pos.empty() || !a.pos[0].is_string()) raise("map: a filter name or attribute= is required");
         const std::string f = a.pos[0].str();
         CallArgs rest = shift(a, 1);
         for (const Value& x : iterate(v)) {
           CallArgs r = rest;
           out.push_back(apply_filter(f, x, r));
         }
         return Value::generator(std::move(out));
       })},
      {"max", FILTER({ return minmax(v, a, true); })},
      {"min", FILTER({ return minmax(v, a, false); })},
      {"reject", FILTER({ return select_impl(v, a, false, false); })},
      {"rejectattr", FILTER({ return select_impl(v, a, true, false); })},
      {"select", FILTER({ return select_impl(v, a, false, true); })},
      {"selectattr", FILTER({ return select_impl(v, a, true, true); })},
      {"replace", FILTER({
         check_args(a, "replace", 3, {"old", "new", "count"});
         const Value count = arg(a, 2, "count", Value::none());
         return Value(py_replace(py_str(v), py_str(arg(a, 0, "old")), py_str(arg(a, 1, "new")),
                                 count.is_none() ? -1 : count.as_int()));
       })},
      {"reverse", FILTER({
         (void)a;
         if (v.is_string()) {
           auto cp = to_code_points(v.str());
           std::reverse(cp.begin(), cp.end());
           return Value(from_code_points(cp.data(), cp.size()));
         }
         ValueList items = iterate(v);
         std::reverse(items.begin(), items.end());
         return Value::generator(std::move(items));
       })},
      {"round", FILTER({ return round_value(v, a); })},
      {"safe", FILTER({ (void)a; return v.is_markup() ? v : Value::markup(py_str(v)); })},
      {"sort", FILTER({
         check_args(a, "sort", 3, {"reverse", "case_sensitive", "attribute"});
         const bool rev = arg(a, 0, "reverse", Value(false)).truthy();
         const bool cs = arg(a, 1, "case_sensitive", Value(false)).truthy();
         const Value attribute = arg(a, 2, "attribute", Value::none());
         ValueList items = iterate(v);
         sort_values(items, [&](const Value& x) { return lower_if_string(attribute.is_none() ? x : attr_path(x, attribute), cs); }, rev);
         return Value::list(std::move(items));
       })},
      {"string", FILTER({ (void)a; return Value(py_str(v)); })},
      {"sum", FILTER({
         check_args(a, "sum", 2, {"attribute", "start"});
         const Value attribute = arg(a, 0, "attribute", Value::none());
         Value acc = arg(a, 1, "start", Value(0));
         for (const Value& x : iterate(v)) acc = binary_op("+", acc, attribute.is_none() ? x : attr_path(x, attribute));
         return acc;
       })},
      {"tojson", FILTER({ return tojson(v, a); })},
      {"trim", FILTER({
         const Value chars = arg(a, 0, "chars", Value::none());
         return Value(py_strip(py_str(v), chars.is_none() ? std::nullopt : std::optional<std::string>(py_str(chars)), true, true));
       })},
      {"unique", FILTER({
         check_args(a, "unique", 2, {"case_sensitive", "attribute"});
         const bool cs = arg(a, 0, "case_sensitive", Value(false)).truthy();
         const Value attribute = arg(a, 1, "attribute", Value::none());
         ValueList out, seen;
         for (const Value& x : iterate(v)) {
           Value k = lower_if_string(attribute.is_none() ? x : attr_path(x, attribute), cs);
           if (std::any_of(seen.begin(), seen.end(), [&](const Value& s) { return equal(s, k); })) continue;
           seen.push_back(std::move(k));
           out.push_back(x);
         }
         return Value::generator(std::move(out));
       })},
      {"wordcount", FILTER({
         (void)a;
         int64_t n = 0;
         bool in = false;
         for (uint32_t c : to_code_points(py_str(v))) {
           const bool w = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c >= 0xC0;
           if (w && !in) ++n;
           in = w;
         }
         return Value(n);
       })},
  };
  return t;
}

#undef FILTER

Filter find(const std::string& name) {
  const std::string n = name == "d" ? "default" : (name == "e" ? "escape" : name);
  for (const auto& [k, f] : table())
    if (n == k) return f;
  return nullptr;
}

}  // namespace

bool has_filter(const std::string& name) { return find(name) != nullptr; }

Value apply_filter(const std::string& name, const Value& v, CallArgs& args) {
  Filter f = find(name);
  if (!f) raise("no filter named '{}'", name);
  return f(v, args);
}

}  // namespace dsa::jinja
