#include "dsa/chat/jinja/value.h"

#include "dsa/chat/jinja/template_error.h"

namespace dsa::jinja {

TemplateError::TemplateError(std::string message, int line)
    : Error(line > 0 ? fmt::format("chat template line {}: {}", line, message) : "chat template: " + message),
      message_(std::move(message)),
      line_(line) {}

const Value* DictObj::find(const Value& key) const {
  for (const auto& [k, v] : items)
    if (equal(k, key)) return &v;
  return nullptr;
}

const Value* DictObj::find(const std::string& key) const {
  for (const auto& [k, v] : items)
    if (k.is_string() && k.str() == key) return &v;
  return nullptr;
}

void DictObj::set(const Value& key, Value v) {
  for (auto& [k, old] : items)
    if (equal(k, key)) {
      old = std::move(v);
      return;
    }
  items.emplace_back(key, std::move(v));
}

Value Value::undefined(std::string hint) {
  Value v;
  v.s_ = std::move(hint);
  return v;
}

Value Value::markup(std::string s) {
  Value v(std::move(s));
  v.i_ = 1;
  return v;
}

Value Value::none() {
  Value v;
  v.kind_ = Kind::None;
  return v;
}

Value Value::list(ValueList items, bool tuple) {
  Value v;
  v.kind_ = Kind::List;
  v.list_ = std::make_shared<ListObj>(ListObj{std::move(items), tuple});
  return v;
}

Value Value::generator(ValueList items) {
  Value v = list(std::move(items));
  v.list_->lazy = true;
  return v;
}

Value Value::dict() { return dict(DictObj{}); }

Value Value::dict(DictObj d) {
  Value v;
  v.kind_ = Kind::Dict;
  v.dict_ = std::make_shared<DictObj>(std::move(d));
  return v;
}

Value Value::function(std::string name, NativeFn fn) {
  Value v;
  v.kind_ = Kind::Callable;
  v.fn_ = std::make_shared<CallableObj>(CallableObj{std::move(name), std::move(fn), nullptr});
  return v;
}

Value Value::make_namespace() {
  Value v;
  v.kind_ = Kind::Namespace;
  v.dict_ = std::make_shared<DictObj>();
  return v;
}

Value Value::from_json(const nlohmann::ordered_json& j) {
  using T = nlohmann::ordered_json::value_t;
  switch (j.type()) {
    case T::null: return none();
    case T::boolean: return Value(j.get<bool>());
    case T::number_integer: return Value(j.get<int64_t>());
    case T::number_unsigned: {
      const uint64_t u = j.get<uint64_t>();
      if (u > static_cast<uint64_t>(INT64_MAX)) return Value(static_cast<double>(u));
      return Value(static_cast<int64_t>(u));
    }
    case T::number_float: return Value(j.get<double>());
    case T::string: return Value(j.get<std::string>());
    case T::array: {
      ValueList items;
      items.reserve(j.size());
      for (const auto& x : j) items.push_back(from_json(x));
      return list(std::move(items));
    }
    case T::object: {
      DictObj d;
      d.items.reserve(j.size());
      for (auto it = j.begin(); it != j.end(); ++it) d.items.emplace_back(Value(it.key()), from_json(it.value()));
      return dict(std::move(d));
    }
    default: return none();  // binary / discarded: not produced by JSON text
  }
}

bool Value::truthy() const {
  switch (kind_) {
    case Kind::Undefined:
    case Kind::None: return false;
    case Kind::Bool:
    case Kind::Int: return i_ != 0;
    case Kind::Float: return f_ != 0;
    case Kind::String: return !s_.empty();
    case Kind::List: return list_->lazy || !list_->items.empty();
    case Kind::Dict: return !dict_->items.empty();
    default: return true;
  }
}

const char* Value::type_name() const {
  switch (kind_) {
    case Kind::Undefined: return "Undefined";
    case Kind::None: return "NoneType";
    case Kind::Bool: return "bool";
    case Kind::Int: return "int";
    case Kind::Float: return "float";
    case Kind::String: return "str";
    case Kind::List: return list_->lazy ? "generator" : (list_->tuple ? "tuple" : "list");
    case Kind::Dict: return "dict";
    case Kind::Callable: return "function";
    case Kind::Namespace: return "Namespace";
  }
  return "object";
}

bool equal(const Value& a, const Value& b) {
  using K = Value::Kind;
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.as_number() == b.as_number();
    return a.as_int() == b.as_int();
  }
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case K::Undefined:
    case K::None: return true;
    case K::String: return a.str() == b.str();
    case K::List: {
      if (a.is_generator() || b.is_generator()) return &a.list_obj() == &b.list_obj();
      if (a.is_tuple() != b.is_tuple()) return false;  // Python: [1] != (1,)
      const auto &x = a.items(), &y = b.items();
      if (x.size() != y.size()) return false;
      for (size_t i = 0; i < x.size(); ++i)
        if (!equal(x[i], y[i])) return false;
      return true;
    }
    case K::Dict: {
      const auto &x = a.dict_obj().items, &y = b.dict_obj().items;
      if (x.size() != y.size()) return false;
      for (const auto& [k, v] : x) {
        const Value* o = b.dict_obj().find(k);
        if (!o || !equal(v, *o)) return false;
      }
      return true;
    }
    case K::Callable: return &a.callable() == &b.callable();
    case K::Namespace: return &a.dict_obj() == &b.dict_obj();
    default: return false;
  }
}

int compare(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) {
      const double x = a.as_number(), y = b.as_number();
      return x < y ? -1 : (x > y ? 1 : 0);
    }
    return a.as_int() < b.as_int() ? -1 : (a.as_int() > b.as_int() ? 1 : 0);
  }
  if (a.is_string() && b.is_string()) {
    const int c = a.str().compare(b.str());  // UTF-8 byte order is code point order
    return c < 0 ? -1 : (c > 0 ? 1 : 0);
  }
  if (a.is_list() && b.is_list() && a.is_tuple() == b.is_tuple() && !a.is_generator() && !b.is_generator()) {
    const auto &x = a.items(), &y = b.items();
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (equal(x[i], y[i])) continue;
      return compare(x[i], y[i]);
    }
    return x.size() < y.size() ? -1 : (x.size() > y.size() ? 1 : 0);
  }
  if (a.is_undefined() || b.is_undefined())
    raise("{} is undefined", a.is_undefined() && !a.str().empty() ? a.str() : (b.str().empty() ? "a value" : b.str()));
  raise("'<' not supported between instances of '{}' and '{}'", a.type_name(), b.type_name());
}

}  // namespace dsa::jinja
