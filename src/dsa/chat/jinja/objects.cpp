// Attribute and item access, iteration and containment with jinja2's rules (builtins.h).
#include <algorithm>

#include "dsa/chat/jinja/builtins.h"
#include "dsa/chat/jinja/py_text.h"
#include "dsa/chat/jinja/template_error.h"

namespace dsa::jinja {

void raise_undefined(const Value& u) { raise("{}", u.str().empty() ? std::string("value is undefined") : u.str()); }

ValueList iterate(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::Undefined: return {};  // jinja2's Undefined iterates as empty
    case Value::Kind::List: return v.items();
    case Value::Kind::Dict: {
      ValueList keys;
      keys.reserve(v.dict_obj().items.size());
      for (const auto& kv : v.dict_obj().items) keys.push_back(kv.first);
      return keys;
    }
    case Value::Kind::String: {
      ValueList chars;
      if (is_ascii(v.str())) {
        for (char c : v.str()) chars.emplace_back(std::string(1, c));
      } else {
        for (uint32_t cp : to_code_points(v.str())) chars.emplace_back(from_code_points(&cp, 1));
      }
      return chars;
    }
    default: raise("'{}' object is not iterable", v.type_name());
  }
}

bool contains(const Value& c, const Value& item) {
  switch (c.kind()) {
    case Value::Kind::String:
      if (item.is_undefined()) raise_undefined(item);
      if (!item.is_string()) raise("'in <string>' requires string as left operand, not {}", item.type_name());
      return c.str().find(item.str()) != std::string::npos;
    case Value::Kind::List:
      return std::any_of(c.items().begin(), c.items().end(), [&](const Value& x) { return equal(x, item); });
    case Value::Kind::Dict: return c.dict_obj().find(item) != nullptr;
    case Value::Kind::Undefined: return false;
    default: raise("argument of type '{}' is not iterable", c.type_name());
  }
}

namespace {

Value no_attribute(const Value& obj, const std::string& name) {
  return Value::undefined(fmt::format("'{} object' has no attribute '{}'", obj.type_name(), name));
}

// Python index (negative from the end) into n elements; -1 when out of range.
int64_t py_index(const Value& key, size_t n) {
  int64_t i = key.as_int();
  if (i < 0) i += static_cast<int64_t>(n);
  return i >= 0 && i < static_cast<int64_t>(n) ? i : -1;
}

}  // namespace

Value getattr(const Value& obj, const std::string& name) {
  switch (obj.kind()) {
    case Value::Kind::Undefined: raise_undefined(obj);
    case Value::Kind::Namespace: {
      const Value* v = obj.dict_obj().find(name);
      return v ? *v : no_attribute(obj, name);
    }
    case Value::Kind::Callable: {
      const Value* v = obj.callable().attrs ? obj.callable().attrs->find(name) : nullptr;
      return v ? *v : no_attribute(obj, name);
    }
    case Value::Kind::Dict: {
      Value m = get_method(obj, name);  // Python attributes (items, get, ...) come before keys
      if (!m.is_undefined() || !m.str().empty()) return m;
      const Value* v = obj.dict_obj().find(name);
      return v ? *v : no_attribute(obj, name);
    }
    default: {
      Value m = get_method(obj, name);
      return m.is_undefined() && m.str().empty() ? no_attribute(obj, name) : m;
    }
  }
}

Value getitem(const Value& obj, const Value& key) {
  switch (obj.kind()) {
    case Value::Kind::Undefined: raise_undefined(obj);
    case Value::Kind::Dict: {
      const Value* v = obj.dict_obj().find(key);
      if (v) return *v;
      break;
    }
    case Value::Kind::List:
      if (obj.is_generator()) return Value::undefined("'generator' object is not subscriptable");
      if (key.is_int() || key.is_bool()) {
        const int64_t i = py_index(key, obj.items().size());
        if (i >= 0) return obj.items()[static_cast<size_t>(i)];
        return Value::undefined(fmt::format("'{} object' has no element {}", obj.type_name(), key.as_int()));
      }
      break;
    case Value::Kind::String:
      if (key.is_int() || key.is_bool()) {
        if (is_ascii(obj.str())) {
          const int64_t i = py_index(key, obj.str().size());
          if (i >= 0) return Value(std::string(1, obj.str()[static_cast<size_t>(i)]));
        } else {
          const auto cp = to_code_points(obj.str());
          const int64_t i = py_index(key, cp.size());
          if (i >= 0) return Value(from_code_points(&cp[static_cast<size_t>(i)], 1));
        }
        return Value::undefined(fmt::format("'str object' has no element {}", key.as_int()));
      }
      break;
    default: break;
  }
  if (key.is_string()) return getattr(obj, key.str());  // jinja2 falls back to the attribute
  return Value::undefined(fmt::format("'{} object' has no element {}", obj.type_name(), py_repr(key)));
}

Value arg(const CallArgs& a, size_t i, const char* name, const Value& def) {
  if (i < a.pos.size()) return a.pos[i];
  for (const auto& [k, v] : a.kw)
    if (k == name) return v;
  return def;
}

void check_args(const CallArgs& a, const char* fn, size_t max_pos, std::initializer_list<const char*> names) {
  if (a.pos.size() > max_pos) raise("{}() takes at most {} positional argument(s), {} given", fn, max_pos, a.pos.size());
  for (const auto& kv : a.kw) {
    const bool known = std::any_of(names.begin(), names.end(), [&](const char* n) { return kv.first == n; });
    if (!known) raise("{}() got an unexpected keyword argument '{}'", fn, kv.first);
    for (size_t i = 0; i < a.pos.size() && i < names.size(); ++i)
      if (kv.first == names.begin()[i]) raise("{}() got multiple values for argument '{}'", fn, kv.first);
  }
}

}  // namespace dsa::jinja
