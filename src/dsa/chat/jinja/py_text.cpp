#include "dsa/chat/jinja/py_text.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>

#include "dsa/chat/jinja/template_error.h"

namespace dsa::jinja {

std::string int_str(int64_t x) { return std::to_string(x); }

// Python's repr(float): the shortest digits that round-trip, positional when the decimal
// exponent is in [-4, 16), else d.ddde+XX; integral values keep ".0".
std::string float_repr(double x) {
  if (std::isnan(x)) return "nan";
  if (std::isinf(x)) return x < 0 ? "-inf" : "inf";
  if (x == 0) return std::signbit(x) ? "-0.0" : "0.0";
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, x, std::chars_format::scientific);
  std::string sci(buf, r.ptr);  // "-d.ddde+XX"
  const bool neg = sci[0] == '-';
  if (neg) sci.erase(0, 1);
  const size_t e = sci.find('e');
  std::string digits = sci.substr(0, e);
  digits.erase(std::remove(digits.begin(), digits.end(), '.'), digits.end());
  const int exp = std::stoi(sci.substr(e + 1));
  std::string out = neg ? "-" : "";
  if (exp >= -4 && exp < 16) {  // Python's repr: positional for decimal exponents in [-4, 16)
    if (exp < 0) {
      out += "0.";
      out.append(static_cast<size_t>(-exp - 1), '0');
      out += digits;
    } else if (static_cast<int>(digits.size()) <= exp + 1) {
      out += digits;
      out.append(static_cast<size_t>(exp + 1 - static_cast<int>(digits.size())), '0');
      out += ".0";
    } else {
      out += digits.substr(0, static_cast<size_t>(exp + 1));
      out += '.';
      out += digits.substr(static_cast<size_t>(exp + 1));
    }
    return out;
  }
  out += digits.substr(0, 1);
  if (digits.size() > 1) out += "." + digits.substr(1);
  out += exp < 0 ? "e-" : "e+";
  const int ae = std::abs(exp);
  if (ae < 10) out += '0';
  out += std::to_string(ae);
  return out;
}

bool is_ascii(std::string_view s) {
  for (unsigned char c : s)
    if (c >= 0x80) return false;
  return true;
}

std::vector<uint32_t> to_code_points(std::string_view s) {
  std::vector<uint32_t> cps;
  cps.reserve(s.size());
  size_t i = 0;
  const size_t n = s.size();
  auto cont = [&](size_t k) { return k < n && (static_cast<unsigned char>(s[k]) & 0xC0) == 0x80; };
  while (i < n) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      cps.push_back(c);
      ++i;
      continue;
    }
    uint32_t cp = 0;
    size_t len = 0;
    if (c >= 0xC2 && c <= 0xDF) {
      len = 2;
      cp = c & 0x1F;
    } else if (c >= 0xE0 && c <= 0xEF) {
      len = 3;
      cp = c & 0x0F;
    } else if (c >= 0xF0 && c <= 0xF4) {
      len = 4;
      cp = c & 0x07;
    }
    bool ok = len > 0;
    for (size_t k = 1; ok && k < len; ++k) {
      if (!cont(i + k)) ok = false;
      else cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
    }
    if (ok && ((len == 3 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) || (len == 4 && (cp < 0x10000 || cp > 0x10FFFF))))
      ok = false;
    if (!ok) {
      cps.push_back(0xFFFD);
      ++i;
      while (cont(i)) ++i;  // one U+FFFD per broken sequence
      continue;
    }
    cps.push_back(cp);
    i += len;
  }
  return cps;
}

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

std::string from_code_points(const uint32_t* cp, size_t n) {
  std::string s;
  s.reserve(n);
  for (size_t i = 0; i < n; ++i) append_utf8(s, cp[i]);
  return s;
}

size_t code_point_count(std::string_view s) {
  if (is_ascii(s)) return s.size();
  return to_code_points(s).size();
}

namespace {

// Python's str.isprintable() for repr(), approximated by the ranges that matter in text:
// controls, C1, separators other than space, format characters, surrogates, private use.
bool printable(uint32_t c) {
  if (c < 0x20 || (c >= 0x7F && c <= 0xA0) || c == 0xAD) return false;
  if ((c >= 0x2000 && c <= 0x200F) || (c >= 0x2028 && c <= 0x202F) || (c >= 0x205F && c <= 0x206F)) return false;
  if (c == 0x1680 || c == 0x3000 || c == 0xFEFF || (c >= 0xD800 && c <= 0xF8FF) || (c >= 0xFFF9 && c <= 0xFFFB))
    return false;
  if (c >= 0xF0000) return false;
  return true;
}

void hex_escape(std::string& out, uint32_t c) {
  char buf[16];
  if (c < 0x100) std::snprintf(buf, sizeof buf, "\\x%02x", c);
  else if (c < 0x10000) std::snprintf(buf, sizeof buf, "\\u%04x", c);
  else std::snprintf(buf, sizeof buf, "\\U%08x", c);
  out += buf;
}

std::string repr_string(const std::string& s) {
  const bool has_single = s.find('\'') != std::string::npos, has_double = s.find('"') != std::string::npos;
  const char q = has_single && !has_double ? '"' : '\'';
  std::string out(1, q);
  for (uint32_t c : to_code_points(s)) {
    if (c == static_cast<uint32_t>(q) || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (!printable(c)) {
      hex_escape(out, c);
    } else {
      append_utf8(out, c);
    }
  }
  out += q;
  return out;
}

std::string repr_seq(const Value& v) {
  const auto& items = v.items();
  std::string out = v.is_tuple() ? "(" : "[";
  for (size_t i = 0; i < items.size(); ++i) {
    if (i) out += ", ";
    out += py_repr(items[i]);
  }
  if (v.is_tuple() && items.size() == 1) out += ",";
  out += v.is_tuple() ? ")" : "]";
  return out;
}

std::string repr_dict(const DictObj& d) {
  std::string out = "{";
  for (size_t i = 0; i < d.items.size(); ++i) {
    if (i) out += ", ";
    out += py_repr(d.items[i].first) + ": " + py_repr(d.items[i].second);
  }
  return out + "}";
}

}  // namespace

std::string py_repr(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::String: return repr_string(v.str());
    case Value::Kind::Undefined: return "Undefined";
    default: break;
  }
  return py_str(v);
}

std::string py_str(const Value& v) {
  using K = Value::Kind;
  switch (v.kind()) {
    case K::Undefined: return "";
    case K::None: return "None";
    case K::Bool: return v.as_bool() ? "True" : "False";
    case K::Int: return int_str(v.as_int());
    case K::Float: return float_repr(v.as_float());
    case K::String: return v.str();
    case K::List: return v.is_generator() ? "<generator object>" : repr_seq(v);
    case K::Dict: return repr_dict(v.dict_obj());
    case K::Callable: return "<function " + v.callable().name + ">";
    case K::Namespace: return "<Namespace " + repr_dict(v.dict_obj()) + ">";
  }
  return "";
}

namespace {

void json_string(std::string& out, const std::string& s, bool ensure_ascii) {
  out += '"';
  auto esc = [&](uint32_t c) {
    char buf[16];
    std::snprintf(buf, sizeof buf, "\\u%04x", c);
    out += buf;
  };
  for (uint32_t c : to_code_points(s)) {
    switch (c) {
      case '"': out += "\\\""; continue;
      case '\\': out += "\\\\"; continue;
      case '\n': out += "\\n"; continue;
      case '\r': out += "\\r"; continue;
      case '\t': out += "\\t"; continue;
      case '\b': out += "\\b"; continue;
      case '\f': out += "\\f"; continue;
      default: break;
    }
    if (c < 0x20) {
      esc(c);
    } else if (ensure_ascii && c >= 0x7F) {
      if (c >= 0x10000) {
        const uint32_t u = c - 0x10000;
        esc(0xD800 + (u >> 10));
        esc(0xDC00 + (u & 0x3FF));
      } else {
        esc(c);
      }
    } else {
      append_utf8(out, c);
    }
  }
  out += '"';
}

std::string json_key(const Value& k) {
  if (k.is_string()) return k.str();
  if (k.is_bool()) return k.as_bool() ? "true" : "false";
  if (k.is_none()) return "null";
  if (k.is_int()) return int_str(k.as_int());
  if (k.is_float()) return float_repr(k.as_float());
  raise("keys must be str, int, float, bool or None, not {}", k.type_name());
}

void dump(std::string& out, const Value& v, const JsonOptions& o, int depth) {
  using K = Value::Kind;
  if (depth > 512) raise("tojson: value nested too deeply");
  auto newline = [&](int d) {
    if (!o.indent) return;
    out += '\n';
    for (int i = 0; i < d; ++i) out += *o.indent;
  };
  switch (v.kind()) {
    case K::None: out += "null"; return;
    case K::Bool: out += v.as_bool() ? "true" : "false"; return;
    case K::Int: out += int_str(v.as_int()); return;
    case K::Float: {
      const double x = v.as_float();
      if (std::isnan(x)) out += "NaN";
      else if (std::isinf(x)) out += x < 0 ? "-Infinity" : "Infinity";
      else out += float_repr(x);
      return;
    }
    case K::String: json_string(out, v.str(), o.ensure_ascii); return;
    case K::List: {
      if (v.is_generator()) raise("Object of type generator is not JSON serializable");
      const auto& items = v.items();
      if (items.empty()) {
        out += "[]";
        return;
      }
      out += '[';
      for (size_t i = 0; i < items.size(); ++i) {
        if (i) out += o.item_sep;
        newline(depth + 1);
        dump(out, items[i], o, depth + 1);
      }
      newline(depth);
      out += ']';
      return;
    }
    case K::Dict: {
      std::vector<std::pair<std::string, const Value*>> kv;
      for (const auto& [k, x] : v.dict_obj().items) {
        std::string key = json_key(k);
        auto it = std::find_if(kv.begin(), kv.end(), [&](const auto& p) { return p.first == key; });
        if (it != kv.end()) it->second = &x;  // later duplicates win, as dict keys 1 and True collide
        else kv.emplace_back(std::move(key), &x);
      }
      if (o.sort_keys) std::stable_sort(kv.begin(), kv.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
      if (kv.empty()) {
        out += "{}";
        return;
      }
      out += '{';
      for (size_t i = 0; i < kv.size(); ++i) {
        if (i) out += o.item_sep;
        newline(depth + 1);
        json_string(out, kv[i].first, o.ensure_ascii);
        out += o.key_sep;
        dump(out, *kv[i].second, o, depth + 1);
      }
      newline(depth);
      out += '}';
      return;
    }
    case K::Undefined: raise("Object of type Undefined is not JSON serializable");
    default: raise("Object of type {} is not JSON serializable", v.type_name());
  }
}

}  // namespace

std::string json_dumps(const Value& v, const JsonOptions& o) {
  std::string out;
  dump(out, v, o, 0);
  return out;
}

bool py_isspace(uint32_t c) {
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

std::string py_strip(std::string_view s, const std::optional<std::string>& chars, bool left, bool right) {
  const std::vector<uint32_t> cp = to_code_points(s);
  std::vector<uint32_t> set;
  if (chars) set = to_code_points(*chars);
  auto strip_it = [&](uint32_t c) { return chars ? std::find(set.begin(), set.end(), c) != set.end() : py_isspace(c); };
  size_t b = 0, e = cp.size();
  if (left)
    while (b < e && strip_it(cp[b])) ++b;
  if (right)
    while (e > b && strip_it(cp[e - 1])) --e;
  return from_code_points(cp.data() + b, e - b);
}

std::vector<std::string> py_split(std::string_view s, const std::optional<std::string>& sep, int64_t maxsplit) {
  std::vector<std::string> out;
  if (sep) {
    if (sep->empty()) raise("empty separator");
    size_t pos = 0;
    while (maxsplit < 0 || static_cast<int64_t>(out.size()) < maxsplit) {
      const size_t f = s.find(*sep, pos);
      if (f == std::string_view::npos) break;
      out.emplace_back(s.substr(pos, f - pos));
      pos = f + sep->size();
    }
    out.emplace_back(s.substr(pos));
    return out;
  }
  const std::vector<uint32_t> cp = to_code_points(s);
  size_t i = 0;
  const size_t n = cp.size();
  while (i < n) {
    while (i < n && py_isspace(cp[i])) ++i;
    if (i >= n) break;
    if (maxsplit >= 0 && static_cast<int64_t>(out.size()) == maxsplit) {
      size_t e = n;
      while (e > i && py_isspace(cp[e - 1])) --e;
      out.push_back(from_code_points(cp.data() + i, e - i));
      return out;
    }
    size_t j = i;
    while (j < n && !py_isspace(cp[j])) ++j;
    out.push_back(from_code_points(cp.data() + i, j - i));
    i = j;
  }
  return out;
}

std::vector<std::string> py_rsplit(std::string_view s, const std::optional<std::string>& sep, int64_t maxsplit) {
  if (maxsplit < 0) return py_split(s, sep, maxsplit);
  std::vector<std::string> out;
  if (sep) {
    if (sep->empty()) raise("empty separator");
    size_t end = s.size();
    while (static_cast<int64_t>(out.size()) < maxsplit) {
      if (end < sep->size()) break;
      const size_t f = s.rfind(*sep, end - sep->size());
      if (f == std::string_view::npos) break;
      out.emplace_back(s.substr(f + sep->size(), end - f - sep->size()));
      end = f;
    }
    out.emplace_back(s.substr(0, end));
    std::reverse(out.begin(), out.end());
    return out;
  }
  const std::vector<uint32_t> cp = to_code_points(s);
  size_t e = cp.size();
  while (e > 0) {
    while (e > 0 && py_isspace(cp[e - 1])) --e;
    if (e == 0) break;
    if (static_cast<int64_t>(out.size()) == maxsplit) {
      size_t b = 0;
      while (b < e && py_isspace(cp[b])) ++b;
      out.push_back(from_code_points(cp.data() + b, e - b));
      break;
    }
    size_t b = e;
    while (b > 0 && !py_isspace(cp[b - 1])) --b;
    out.push_back(from_code_points(cp.data() + b, e - b));
    e = b;
  }
  std::reverse(out.begin(), out.end());
  return out;
}

std::vector<std::string> py_splitlines(std::string_view s, bool keepends) {
  const std::vector<uint32_t> cp = to_code_points(s);
  std::vector<std::string> out;
  size_t start = 0, i = 0;
  auto is_break = [](uint32_t c) {
    return c == '\n' || c == '\r' || c == 0x0B || c == 0x0C || c == 0x1C || c == 0x1D || c == 0x1E || c == 0x85 ||
           c == 0x2028 || c == 0x2029;
  };
  while (i < cp.size()) {
    if (!is_break(cp[i])) {
      ++i;
      continue;
    }
    size_t eol = i + 1;
    if (cp[i] == '\r' && eol < cp.size() && cp[eol] == '\n') ++eol;
    out.push_back(from_code_points(cp.data() + start, (keepends ? eol : i) - start));
    start = i = eol;
  }
  if (start < cp.size()) out.push_back(from_code_points(cp.data() + start, cp.size() - start));
  return out;
}

std::string py_replace(std::string_view s, std::string_view old, std::string_view repl, int64_t count) {
  std::string out;
  if (old.empty()) {  // Python inserts repl between every code point (and at both ends)
    const std::vector<uint32_t> cp = to_code_points(s);
    int64_t done = 0;
    for (size_t i = 0; i <= cp.size(); ++i) {
      if (count < 0 || done < count) {
        out += repl;
        ++done;
      }
      if (i < cp.size()) append_utf8(out, cp[i]);
    }
    return out;
  }
  size_t pos = 0;
  int64_t done = 0;
  while (count < 0 || done < count) {
    const size_t f = s.find(old, pos);
    if (f == std::string_view::npos) break;
    out.append(s.substr(pos, f - pos));
    out.append(repl);
    pos = f + old.size();
    ++done;
  }
  out.append(s.substr(pos));
  return out;
}

std::string ascii_lower(std::string_view s) {
  std::string o(s);
  for (char& c : o)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  return o;
}

std::string ascii_upper(std::string_view s) {
  std::string o(s);
  for (char& c : o)
    if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
  return o;
}

namespace {
bool ascii_alpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
bool non_ascii_lead(char c) { return static_cast<unsigned char>(c) >= 0x80; }
}  // namespace

std::string py_title(std::string_view s) {
  std::string o(s);
  bool prev_cased = false;
  for (char& c : o) {
    if (ascii_alpha(c)) {
      c = prev_cased ? static_cast<char>(std::tolower(static_cast<unsigned char>(c)))
                     : static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
      prev_cased = true;
    } else if (!non_ascii_lead(c)) {
      prev_cased = false;
    }
  }
  return o;
}

std::string html_escape(std::string_view s) {
  std::string o;
  for (char c : s) {
    switch (c) {
      case '&': o += "&amp;"; break;
      case '<': o += "&lt;"; break;
      case '>': o += "&gt;"; break;
      case '"': o += "&#34;"; break;
      case '\'': o += "&#39;"; break;
      default: o += c;
    }
  }
  return o;
}

std::string py_capitalize(std::string_view s) {
  std::string o = ascii_lower(s);
  if (!o.empty() && o[0] >= 'a' && o[0] <= 'z') o[0] = static_cast<char>(o[0] - 'a' + 'A');
  return o;
}

}  // namespace dsa::jinja
