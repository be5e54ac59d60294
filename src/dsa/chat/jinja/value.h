// Value: the dynamic value of the Jinja engine, with Python's semantics as Jinja templates see
// them (Hugging Face chat templates are written against Python's jinja2): undefined (carrying a
// hint for the error it raises when used), None, bool, int (64-bit), float, str (UTF-8), list
// and tuple, dict (insertion-ordered, like Python's), callables (filters, methods, macros,
// globals) and namespace() objects (the only mutable container a template can write to).
// Lists, dicts and namespaces are shared by reference, as in Python.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace dsa::jinja {

class Value;
using ValueList = std::vector<Value>;

struct ListObj {
  ValueList items;
  bool tuple = false;
  // A generator in jinja2 (what map / select / reject / selectattr / rejectattr / unique / batch /
  // items / reverse return): iterable, but always true, without len(), indexing or JSON form.
  bool lazy = false;
};

struct DictObj {
  std::vector<std::pair<Value, Value>> items;
  const Value* find(const Value& key) const;
  const Value* find(const std::string& key) const;
  void set(const Value& key, Value v);  // replaces in place or appends
};

// Arguments of a call: positional, then keyword (in source order).
struct CallArgs {
  ValueList pos;
  std::vector<std::pair<std::string, Value>> kw;
};

using NativeFn = std::function<Value(CallArgs&)>;

struct CallableObj {
  std::string name;  // for messages and str()
  NativeFn fn;
  std::shared_ptr<DictObj> attrs;  // attributes of a callable object (a for loop's `loop`); may be null
};

class Value {
 public:
  enum class Kind : uint8_t { Undefined, None, Bool, Int, Float, String, List, Dict, Callable, Namespace };

  Value() = default;  // undefined
  Value(bool b) : kind_(Kind::Bool), i_(b) {}
  Value(int v) : kind_(Kind::Int), i_(v) {}
  Value(int64_t v) : kind_(Kind::Int), i_(v) {}
  Value(double v) : kind_(Kind::Float), f_(v) {}
  Value(std::string s) : kind_(Kind::String), s_(std::move(s)) {}
  Value(const char* s) : kind_(Kind::String), s_(s) {}

  static Value undefined(std::string hint = {});  // hint: the message used when it is misused
  // A "safe" string (jinja2's Markup, made by the safe / escape filters): `+` with a plain string
  // HTML-escapes the plain one, as Markup.__add__ does even without autoescaping.
  static Value markup(std::string s);
  static Value none();
  static Value list(ValueList items = {}, bool tuple = false);
  static Value generator(ValueList items);  // ListObj::lazy
  static Value dict();
  static Value dict(DictObj d);
  static Value function(std::string name, NativeFn fn);
  static Value make_namespace();
  // JSON -> Value (objects keep their key order). Python's json.loads view of the data.
  static Value from_json(const nlohmann::ordered_json& j);

  Kind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == Kind::Undefined; }
  bool is_none() const { return kind_ == Kind::None; }
  bool is_bool() const { return kind_ == Kind::Bool; }
  bool is_int() const { return kind_ == Kind::Int; }
  bool is_float() const { return kind_ == Kind::Float; }
  bool is_number() const { return kind_ == Kind::Int || kind_ == Kind::Float || kind_ == Kind::Bool; }
  bool is_string() const { return kind_ == Kind::String; }
  bool is_markup() const { return kind_ == Kind::String && i_ == 1; }
  bool is_list() const { return kind_ == Kind::List; }
  bool is_tuple() const { return kind_ == Kind::List && list_->tuple; }
  bool is_generator() const { return kind_ == Kind::List && list_->lazy; }
  bool is_dict() const { return kind_ == Kind::Dict; }
  bool is_callable() const { return kind_ == Kind::Callable; }
  bool is_namespace() const { return kind_ == Kind::Namespace; }

  bool as_bool() const { return i_ != 0; }
  int64_t as_int() const { return i_; }  // Int or Bool
  double as_number() const { return kind_ == Kind::Float ? f_ : static_cast<double>(i_); }
  double as_float() const { return f_; }
  const std::string& str() const { return s_; }  // String; the hint for Undefined
  ListObj& list_obj() const { return *list_; }
  const ValueList& items() const { return list_->items; }
  DictObj& dict_obj() const { return *dict_; }  // Dict and Namespace
  const CallableObj& callable() const { return *fn_; }

  // Python's bool(x) (undefined is false).
  bool truthy() const;
  // "str", "int", "dict", ... as Python names types (for messages).
  const char* type_name() const;

 private:
  Kind kind_ = Kind::Undefined;
  int64_t i_ = 0;
  double f_ = 0;
  std::string s_;
  std::shared_ptr<ListObj> list_;
  std::shared_ptr<DictObj> dict_;
  std::shared_ptr<CallableObj> fn_;
};

// Python's ==. Never throws.
bool equal(const Value& a, const Value& b);
// Python's <, as -1 / 0 / 1; throws TemplateError for unorderable types ("'<' not supported...").
int compare(const Value& a, const Value& b);

}  // namespace dsa::jinja
