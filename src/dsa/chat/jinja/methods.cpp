// Methods of str, dict and list values as Python defines them (builtins.h).
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "dsa/chat/jinja/builtins.h"
#include "dsa/chat/jinja/py_text.h"
#include "dsa/chat/jinja/template_error.h"

namespace dsa::jinja {
namespace {

std::optional<std::string> opt_str(const Value& v, const char* fn) {
  if (v.is_undefined() || v.is_none()) return std::nullopt;
  if (!v.is_string()) raise("{}() argument must be str or None, not {}", fn, v.type_name());
  return v.str();
}

int64_t int_arg(const Value& v, const char* fn, int64_t def) {
  if (v.is_undefined()) return def;
  if (!v.is_int() && !v.is_bool()) raise("{}(): '{}' object cannot be interpreted as an integer", fn, v.type_name());
  return v.as_int();
}

std::string str_arg(const Value& v, const char* fn) {
  if (!v.is_string()) raise("{}() argument must be str, not {}", fn, v.type_name());
  return v.str();
}

Value str_list(std::vector<std::string> parts) {
  ValueList out;
  out.reserve(parts.size());
  for (auto& p : parts) out.emplace_back(std::move(p));
  return Value::list(std::move(out));
}

bool all_chars(const std::string& s, bool (*pred)(uint32_t)) {
  if (s.empty()) return false;
  for (uint32_t c : to_code_points(s))
    if (!pred(c)) return false;
  return true;
}

// Index of `sub` in code points (or -1), searching from the left or the right.
int64_t find_cp(const std::string& s, const std::string& sub, bool right) {
  const size_t f = right ? s.rfind(sub) : s.find(sub);
  if (f == std::string::npos) return -1;
  return static_cast<int64_t>(code_point_count(std::string_view(s).substr(0, f)));
}

bool prefix_match(const std::string& s, const Value& p, bool suffix, const char* fn) {
  auto one = [&](const std::string& x) {
    if (x.size() > s.size()) return false;
    return suffix ? s.compare(s.size() - x.size(), x.size(), x) == 0 : s.compare(0, x.size(), x) == 0;
  };
  if (p.is_string()) return one(p.str());
  if (p.is_tuple()) {
    for (const Value& x : p.items()) {
      if (!x.is_string()) raise("{}(): tuple for {} must only contain str, not {}", fn, fn, x.type_name());
      if (one(x.str())) return true;
    }
    return false;
  }
  raise("{} first arg must be str or a tuple of str, not {}", fn, p.type_name());
}

std::string pad(const std::string& s, int64_t width, const std::string& fill, int where) {  // -1 left, 0 center, 1 right
  const int64_t n = static_cast<int64_t>(code_point_count(s));
  if (width <= n) return s;
  if (code_point_count(fill) != 1) raise("the fill character must be exactly one character long");
  const int64_t total = width - n;
  int64_t left = where < 0 ? 0 : (where > 0 ? total : total / 2 + (total & width & 1));
  std::string out;
  for (int64_t i = 0; i < left; ++i) out += fill;
  out += s;
  for (int64_t i = 0; i < total - left; ++i) out += fill;
  return out;
}

// One str.format field spec: [[fill]align][sign][0][width][.precision][type], types s d f e g x
// o b % (and none).
std::string format_field(const Value& v, const std::string& spec) {
  size_t i = 0;
  std::string fill = " ";
  char align = 0, sign = '-', type = 0;
  auto is_align = [](char c) { return c == '<' || c == '>' || c == '^' || c == '='; };
  const auto cps = to_code_points(spec);
  if (cps.size() >= 2 && cps[1] < 128 && is_align(static_cast<char>(cps[1]))) {
    fill = from_code_points(&cps[0], 1);
    align = static_cast<char>(cps[1]);
    i = fill.size() + 1;
  } else if (!spec.empty() && is_align(spec[0])) {
    align = spec[0];
    i = 1;
  }
  if (i < spec.size() && (spec[i] == '+' || spec[i] == '-' || spec[i] == ' ')) sign = spec[i++];
  if (i < spec.size() && spec[i] == '0') {
    if (!align) fill = "0", align = '=';
    ++i;
  }
  size_t width = 0;
  while (i < spec.size() && spec[i] >= '0' && spec[i] <= '9') width = width * 10 + static_cast<size_t>(spec[i++] - '0');
  int prec = -1;
  if (i < spec.size() && spec[i] == '.') {
    prec = 0;
    ++i;
    while (i < spec.size() && spec[i] >= '0' && spec[i] <= '9') prec = prec * 10 + (spec[i++] - '0');
  }
  if (i < spec.size()) type = spec[i++];
  if (i != spec.size()) raise("str.format(): unsupported format spec '{}'", spec);
  std::string body;
  bool numeric = v.is_number() && type != 's';
  char buf[512];
  if (type == 's' || (!type && !v.is_number())) {
    if (v.is_number() && type == 's') raise("Unknown format code 's' for object of type '{}'", v.type_name());
    body = py_str(v);
    if (prec >= 0) {
      const auto c = to_code_points(body);
      if (static_cast<size_t>(prec) < c.size()) body = from_code_points(c.data(), static_cast<size_t>(prec));
    }
  } else {
    if (!v.is_number()) raise("Unknown format code '{}' for object of type '{}'", std::string(1, type), v.type_name());
    const bool neg = v.as_number() < 0 || (v.is_float() && std::signbit(v.as_float()));
    const double x = std::fabs(v.as_number());
    switch (type) {
      case 0:
        if (v.is_float() && prec >= 0) std::snprintf(buf, sizeof buf, "%.*g", prec == 0 ? 1 : prec, x), body = buf;
        else body = py_str(v.is_float() ? Value(x) : Value(v.as_int() < 0 ? -v.as_int() : v.as_int()));
        break;
      case 'd':
      case 'x':
      case 'X':
      case 'o':
      case 'b': {
        if (v.is_float()) raise("Unknown format code '{}' for object of type 'float'", std::string(1, type));
        unsigned long long u = static_cast<unsigned long long>(v.as_int() < 0 ? -(v.as_int() + 1) + 1ull : v.as_int());
        if (type == 'b') {
          body = u ? "" : "0";
          for (; u; u >>= 1) body.insert(body.begin(), static_cast<char>('0' + (u & 1)));
        } else {
          std::snprintf(buf, sizeof buf, type == 'd' ? "%llu" : type == 'x' ? "%llx" : type == 'X' ? "%llX" : "%llo", u);
          body = buf;
        }
        break;
      }
      case 'f':
      case 'F':
      case 'e':
      case 'E':
      case 'g':
      case 'G':
        std::snprintf(buf, sizeof buf, (std::string("%.*") + type).c_str(), prec < 0 ? 6 : prec, x);
        body = buf;
        break;
      case '%':
        std::snprintf(buf, sizeof buf, "%.*f%%", prec < 0 ? 6 : prec, x * 100);
        body = buf;
        break;
      default: raise("str.format(): unsupported format type '{}'", std::string(1, type));
    }
    if (neg) body = "-" + body;
    else if (sign == '+') body = "+" + body;
    else if (sign == ' ') body = " " + body;
  }
  const size_t n = code_point_count(body);
  if (n >= width) return body;
  const size_t padn = width - n;
  auto rep = [&](size_t k) {
    std::string r;
    for (size_t j = 0; j < k; ++j) r += fill;
    return r;
  };
  if (!align) align = numeric ? '>' : '<';
  if (align == '<') return body + rep(padn);
  if (align == '>') return rep(padn) + body;
  if (align == '^') return rep(padn / 2) + body + rep(padn - padn / 2);
  const size_t sign_len = !body.empty() && (body[0] == '-' || body[0] == '+' || body[0] == ' ') ? 1 : 0;
  return body.substr(0, sign_len) + rep(padn) + body.substr(sign_len);
}

// str.format: {} / {0} / {name} fields with optional format specs (no conversions or nested
// fields).
std::string py_format(const std::string& f, const CallArgs& a) {
  std::string out;
  size_t auto_idx = 0;
  for (size_t i = 0; i < f.size(); ++i) {
    const char c = f[i];
    if (c == '{' && i + 1 < f.size() && f[i + 1] == '{') {
      out += '{';
      ++i;
      continue;
    }
    if (c == '}' && i + 1 < f.size() && f[i + 1] == '}') {
      out += '}';
      ++i;
      continue;
    }
    if (c == '}') raise("Single '}}' encountered in format string");
    if (c != '{') {
      out += c;
      continue;
    }
    const size_t close = f.find('}', i);
    if (close == std::string::npos) raise("Single '{{' encountered in format string");
    std::string field = f.substr(i + 1, close - i - 1), spec;
    const size_t colon = field.find(':');
    if (colon != std::string::npos) {
      spec = field.substr(colon + 1);
      field.resize(colon);
    }
    if (field.find_first_of("!.[{") != std::string::npos) raise("str.format(): conversions and nested fields are not supported");
    const Value* v = nullptr;
    if (field.empty()) {
      if (auto_idx >= a.pos.size()) raise("Replacement index {} out of range for positional args tuple", auto_idx);
      v = &a.pos[auto_idx++];
    } else if (std::all_of(field.begin(), field.end(), [](char ch) { return ch >= '0' && ch <= '9'; })) {
      const size_t k = std::stoul(field);
      if (k >= a.pos.size()) raise("Replacement index {} out of range for positional args tuple", k);
      v = &a.pos[k];
    } else {
      for (const auto& kv : a.kw)
        if (kv.first == field) v = &kv.second;
      if (!v) raise("KeyError: '{}'", field);
    }
    out += spec.empty() ? py_str(*v) : format_field(*v, spec);
    i = close;
  }
  return out;
}

Value bind(const Value& self, const std::string& name, Value (*fn)(const Value&, CallArgs&)) {
  return Value::function(name, [self, fn](CallArgs& a) { return fn(self, a); });
}

#define METHOD(...) [](const Value& s, [[maybe_unused]] CallArgs& a) -> Value __VA_ARGS__

Value string_method(const Value& obj, const std::string& n) {
  using F = Value (*)(const Value&, CallArgs&);
  static const std::vector<std::pair<const char*, F>> table = {
      {"strip", METHOD({ return Value(py_strip(s.str(), opt_str(arg(a, 0, "chars"), "strip"), true, true)); })},
      {"lstrip", METHOD({ return Value(py_strip(s.str(), opt_str(arg(a, 0, "chars"), "lstrip"), true, false)); })},
      {"rstrip", METHOD({ return Value(py_strip(s.str(), opt_str(arg(a, 0, "chars"), "rstrip"), false, true)); })},
      {"split", METHOD({
         return str_list(py_split(s.str(), opt_str(arg(a, 0, "sep"), "split"), int_arg(arg(a, 1, "maxsplit"), "split", -1)));
       })},
      {"rsplit", METHOD({
         return str_list(py_rsplit(s.str(), opt_str(arg(a, 0, "sep"), "rsplit"), int_arg(arg(a, 1, "maxsplit"), "rsplit", -1)));
       })},
      {"splitlines", METHOD({ return str_list(py_splitlines(s.str(), arg(a, 0, "keepends").truthy())); })},
      {"startswith", METHOD({
         if (a.pos.size() != 1) raise("startswith() takes exactly one argument here");
         return Value(prefix_match(s.str(), a.pos[0], false, "startswith"));
       })},
      {"endswith", METHOD({
         if (a.pos.size() != 1) raise("endswith() takes exactly one argument here");
         return Value(prefix_match(s.str(), a.pos[0], true, "endswith"));
       })},
      {"upper", METHOD({ return Value(ascii_upper(s.str())); })},
      {"lower", METHOD({ return Value(ascii_lower(s.str())); })},
      {"casefold", METHOD({ return Value(ascii_lower(s.str())); })},
      {"title", METHOD({ return Value(py_title(s.str())); })},
      {"capitalize", METHOD({ return Value(py_capitalize(s.str())); })},
      {"replace", METHOD({
         return Value(py_replace(s.str(), str_arg(arg(a, 0, "old"), "replace"), str_arg(arg(a, 1, "new"), "replace"),
                                 int_arg(arg(a, 2, "count"), "replace", -1)));
       })},
      {"find", METHOD({ return Value(find_cp(s.str(), str_arg(arg(a, 0, "sub"), "find"), false)); })},
      {"rfind", METHOD({ return Value(find_cp(s.str(), str_arg(arg(a, 0, "sub"), "rfind"), true)); })},
      {"index", METHOD({
         const int64_t i = find_cp(s.str(), str_arg(arg(a, 0, "sub"), "index"), false);
         if (i < 0) raise("substring not found");
         return Value(i);
       })},
      {"rindex", METHOD({
         const int64_t i = find_cp(s.str(), str_arg(arg(a, 0, "sub"), "rindex"), true);
         if (i < 0) raise("substring not found");
         return Value(i);
       })},
      {"count", METHOD({
         const std::string& sub = str_arg(arg(a, 0, "sub"), "count");
         if (sub.empty()) return Value(static_cast<int64_t>(code_point_count(s.str()) + 1));
         int64_t n = 0;
         for (size_t p = s.str().find(sub); p != std::string::npos; p = s.str().find(sub, p + sub.size())) ++n;
         return Value(n);
       })},
      {"join", METHOD({
         std::string out;
         bool first = true;
         for (const Value& x : iterate(arg(a, 0, "iterable"))) {
           if (!x.is_string()) raise("sequence item: expected str instance, {} found", x.type_name());
           if (!first) out += s.str();
           out += x.str();
           first = false;
         }
         return Value(out);
       })},
      {"isdigit", METHOD({ return Value(all_chars(s.str(), [](uint32_t c) { return c >= '0' && c <= '9'; })); })},
      {"isdecimal", METHOD({ return Value(all_chars(s.str(), [](uint32_t c) { return c >= '0' && c <= '9'; })); })},
      {"isnumeric", METHOD({ return Value(all_chars(s.str(), [](uint32_t c) { return c >= '0' && c <= '9'; })); })},
      {"isalpha", METHOD({
         return Value(all_chars(s.str(), [](uint32_t c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c >= 0xC0; }));
       })},
      {"isalnum", METHOD({
         return Value(all_chars(s.str(), [](uint32_t c) {
           return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c >= 0xC0;
         }));
       })},
      {"isspace", METHOD({ return Value(all_chars(s.str(), py_isspace)); })},
      {"islower", METHOD({
         const std::string& x = s.str();
         return Value(x != ascii_upper(x) && x == ascii_lower(x));
       })},
      {"isupper", METHOD({
         const std::string& x = s.str();
         return Value(x != ascii_lower(x) && x == ascii_upper(x));
       })},
      {"format", METHOD({ return Value(py_format(s.str(), a)); })},
      {"zfill", METHOD({
         const int64_t w = int_arg(arg(a, 0, "width"), "zfill", 0);
         std::string x = s.str();
         const int64_t n = static_cast<int64_t>(code_point_count(x));
         if (w <= n) return Value(x);
         const bool sign = !x.empty() && (x[0] == '-' || x[0] == '+');
         x.insert(sign ? 1 : 0, static_cast<size_t>(w - n), '0');
         return Value(x);
       })},
      {"ljust", METHOD({ return Value(pad(s.str(), int_arg(arg(a, 0, "width"), "ljust", 0), arg(a, 1, "fillchar", Value(" ")).str(), -1)); })},
      {"rjust", METHOD({ return Value(pad(s.str(), int_arg(arg(a, 0, "width"), "rjust", 0), arg(a, 1, "fillchar", Value(" ")).str(), 1)); })},
      {"center", METHOD({ return Value(pad(s.str(), int_arg(arg(a, 0, "width"), "center", 0), arg(a, 1, "fillchar", Value(" ")).str(), 0)); })},
      {"partition", METHOD({
         const std::string& sep = str_arg(arg(a, 0, "sep"), "partition");
         if (sep.empty()) raise("empty separator");
         const size_t f = s.str().find(sep);
         if (f == std::string::npos) return Value::list({s, Value(""), Value("")}, true);
         return Value::list({Value(s.str().substr(0, f)), Value(sep), Value(s.str().substr(f + sep.size()))}, true);
       })},
      {"rpartition", METHOD({
         const std::string& sep = str_arg(arg(a, 0, "sep"), "rpartition");
         if (sep.empty()) raise("empty separator");
         const size_t f = s.str().rfind(sep);
         if (f == std::string::npos) return Value::list({Value(""), Value(""), s}, true);
         return Value::list({Value(s.str().substr(0, f)), Value(sep), Value(s.str().substr(f + sep.size()))}, true);
       })},
      {"removeprefix", METHOD({
         const std::string& p = str_arg(arg(a, 0, "prefix"), "removeprefix");
         return Value(s.str().compare(0, p.size(), p) == 0 ? s.str().substr(p.size()) : s.str());
       })},
      {"removesuffix", METHOD({
         const std::string& p = str_arg(arg(a, 0, "suffix"), "removesuffix");
         const std::string& x = s.str();
         const bool m = !p.empty() && x.size() >= p.size() && x.compare(x.size() - p.size(), p.size(), p) == 0;
         return Value(m ? x.substr(0, x.size() - p.size()) : x);
       })},
  };
  for (const auto& [name, fn] : table)
    if (n == name) return bind(obj, n, fn);
  return Value::undefined();
}

Value dict_method(const Value& obj, const std::string& n) {
  using F = Value (*)(const Value&, CallArgs&);
  static const std::vector<std::pair<const char*, F>> table = {
      {"items", METHOD({
         check_args(a, "items", 0, {});
         ValueList out;
         for (const auto& [k, v] : s.dict_obj().items) out.push_back(Value::list({k, v}, true));
         return Value::list(std::move(out));
       })},
      {"keys", METHOD({
         check_args(a, "keys", 0, {});
         return Value::list(iterate(s));
       })},
      {"values", METHOD({
         check_args(a, "values", 0, {});
         ValueList out;
         for (const auto& kv : s.dict_obj().items) out.push_back(kv.second);
         return Value::list(std::move(out));
       })},
      {"get", METHOD({
         if (a.pos.empty() || a.pos.size() > 2 || !a.kw.empty()) raise("get() takes 1 or 2 positional arguments");
         const Value* v = s.dict_obj().find(a.pos[0]);
         return v ? *v : (a.pos.size() > 1 ? a.pos[1] : Value::none());
       })},
      {"copy", METHOD({ return Value::dict(s.dict_obj()); })},
  };
  for (const auto& [name, fn] : table)
    if (n == name) return bind(obj, n, fn);
  return Value::undefined();
}

Value list_method(const Value& obj, const std::string& n) {
  using F = Value (*)(const Value&, CallArgs&);
  static const std::vector<std::pair<const char*, F>> table = {
      {"index", METHOD({
         const auto& it = s.items();
         for (size_t i = 0; i < it.size(); ++i)
           if (equal(it[i], arg(a, 0, "value"))) return Value(static_cast<int64_t>(i));
         raise("{} is not in list", py_repr(arg(a, 0, "value")));
       })},
      {"count", METHOD({
         int64_t c = 0;
         for (const Value& x : s.items()) c += equal(x, arg(a, 0, "value"));
         return Value(c);
       })},
      {"copy", METHOD({ return Value::list(s.items(), s.is_tuple()); })},
  };
  for (const auto& [name, fn] : table) {
    if (n != name) continue;
    if (obj.is_tuple() && n == "copy") break;
    return bind(obj, n, fn);
  }
  return Value::undefined();
}

#undef METHOD

bool unsafe(const Value& obj, const std::string& n) {
  static const char* dict_mut[] = {"clear", "pop", "popitem", "setdefault", "update"};
  static const char* list_mut[] = {"append", "extend", "insert", "pop", "remove", "reverse", "sort", "clear"};
  if (obj.is_dict()) return std::find(std::begin(dict_mut), std::end(dict_mut), n) != std::end(dict_mut);
  if (obj.is_list() && !obj.is_tuple()) return std::find(std::begin(list_mut), std::end(list_mut), n) != std::end(list_mut);
  return false;
}

}  // namespace

Value get_method(const Value& obj, const std::string& name) {
  if (unsafe(obj, name))
    return Value::undefined(fmt::format("access to attribute '{}' of '{}' object is unsafe.", name, obj.type_name()));
  if (obj.is_string()) return string_method(obj, name);
  if (obj.is_dict()) return dict_method(obj, name);
  if (obj.is_list()) return list_method(obj, name);
  return Value::undefined();
}

}  // namespace dsa::jinja
