// Global functions of templates: jinja2's range / namespace / dict / joiner and Hugging Face's
// chat-template helpers raise_exception and strftime_now (builtins.h).
#include <ctime>
#include <memory>

#include "dsa/chat/jinja/builtins.h"
#include "dsa/chat/jinja/py_text.h"
#include "dsa/chat/jinja/template_error.h"

namespace dsa::jinja {
namespace {

constexpr int64_t kMaxRange = 100000;  // jinja2's sandbox bound

int64_t int_of(const Value& v, const char* what) {
  if (!v.is_int() && !v.is_bool()) raise("range(): '{}' object cannot be interpreted as an integer ({})", v.type_name(), what);
  return v.as_int();
}

Value range_fn(CallArgs& a) {
  if (!a.kw.empty()) raise("range() takes no keyword arguments");
  if (a.pos.empty() || a.pos.size() > 3) raise("range expected 1 to 3 arguments, got {}", a.pos.size());
  int64_t start = 0, stop, step = 1;
  if (a.pos.size() == 1) {
    stop = int_of(a.pos[0], "stop");
  } else {
    start = int_of(a.pos[0], "start");
    stop = int_of(a.pos[1], "stop");
    if (a.pos.size() == 3) step = int_of(a.pos[2], "step");
  }
  if (step == 0) raise("range() arg 3 must not be zero");
  // Count in long double: the ends may be anywhere in int64.
  const long double n = step > 0 ? (static_cast<long double>(stop) - start + step - 1) / step
                                 : (static_cast<long double>(start) - stop - step - 1) / -step;
  const int64_t count = n > 0 ? static_cast<int64_t>(n) : 0;
  if (count > kMaxRange) raise("Range too big. The sandbox blocks ranges larger than MAX_RANGE ({}).", kMaxRange);
  ValueList out;
  out.reserve(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) out.emplace_back(start + i * step);
  return Value::list(std::move(out));
}

void fill_attrs(DictObj& d, CallArgs& a, const char* fn) {
  if (a.pos.size() > 1) raise("{}() takes at most one positional argument", fn);
  if (!a.pos.empty()) {
    const Value& m = a.pos[0];
    if (m.is_dict() || m.is_namespace()) {
      for (const auto& [k, v] : m.dict_obj().items) d.set(k, v);
    } else if (m.is_list()) {
      for (const Value& p : m.items()) {
        if (!p.is_list() || p.items().size() != 2) raise("{}(): sequence elements must be pairs", fn);
        d.set(p.items()[0], p.items()[1]);
      }
    } else {
      raise("{}(): '{}' object is not a mapping", fn, m.type_name());
    }
  }
  for (auto& [k, v] : a.kw) d.set(Value(k), v);
}

}  // namespace

Value make_globals() {
  DictObj g;
  g.set(Value("range"), Value::function("range", range_fn));
  g.set(Value("namespace"), Value::function("namespace", [](CallArgs& a) {
          Value ns = Value::make_namespace();
          fill_attrs(ns.dict_obj(), a, "namespace");
          return ns;
        }));
  g.set(Value("dict"), Value::function("dict", [](CallArgs& a) {
          Value d = Value::dict();
          fill_attrs(d.dict_obj(), a, "dict");
          return d;
        }));
  g.set(Value("joiner"), Value::function("joiner", [](CallArgs& a) {
          const std::string sep = py_str(arg(a, 0, "sep", Value(", ")));
          auto used = std::make_shared<bool>(false);
          return Value::function("joiner", [sep, used](CallArgs&) {
            if (!*used) {
              *used = true;
              return Value("");
            }
            return Value(sep);
          });
        }));
  g.set(Value("raise_exception"), Value::function("raise_exception", [](CallArgs& a) -> Value {
          raise("{}", py_str(arg(a, 0, "message", Value(""))));
        }));
  g.set(Value("strftime_now"), Value::function("strftime_now", [](CallArgs& a) {
          const Value f = arg(a, 0, "format");
          if (!f.is_string()) raise("strftime_now() needs a format string");
          const std::time_t t = std::time(nullptr);
          std::tm tm{};
          localtime_r(&t, &tm);
          char buf[512];
          const size_t n = std::strftime(buf, sizeof buf, f.str().c_str(), &tm);
          return Value(std::string(buf, n));
        }));
  return Value::dict(std::move(g));
}

}  // namespace dsa::jinja
