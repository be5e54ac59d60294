#include "dsa/chat/jinja/interpreter.h"

#include <algorithm>
#include <exception>

#include "dsa/chat/jinja/builtins.h"
#include "dsa/chat/jinja/operators.h"
#include "dsa/chat/jinja/parser.h"
#include "dsa/chat/jinja/py_text.h"

namespace dsa::jinja {

const Value* Scope::lookup(const std::string& name) const {
  for (const Scope* s = this; s; s = s->parent.get())
    for (const auto& [k, v] : s->vars)
      if (k == name) return &v;
  return nullptr;
}

void Scope::set(const std::string& name, Value v) {
  for (auto& [k, old] : vars)
    if (k == name) {
      old = std::move(v);
      return;
    }
  vars.emplace_back(name, std::move(v));
}

namespace {

ScopePtr child(const ScopePtr& parent) {
  auto s = std::make_shared<Scope>();
  s->parent = parent;
  return s;
}

}  // namespace

void Interpreter::step() {
  if (++steps_ > limits_.max_steps) raise("the template ran more than {} steps (a loop that does not end?)", limits_.max_steps);
}

void Interpreter::append(std::string& out, const std::string& s) {
  out += s;
  if (out.size() > limits_.max_output_bytes) raise("the output is larger than {} bytes", limits_.max_output_bytes);
}

std::string Interpreter::render(const Body& body, const Value& context) {
  auto globals = std::make_shared<Scope>();
  const Value g = make_globals();
  for (const auto& [k, v] : g.dict_obj().items) globals->set(k.str(), v);
  auto top = child(globals);
  if (context.is_dict())
    for (const auto& [k, v] : context.dict_obj().items)
      if (k.is_string()) top->set(k.str(), v);
  std::string out;
  exec_body(body, top, out);
  return out;
}

Interpreter::Flow Interpreter::exec_body(const Body& body, const ScopePtr& scope, std::string& out) {
  for (const auto& s : body) {
    const Flow f = exec(*s, scope, out);
    if (f != Flow::Normal) return f;
  }
  return Flow::Normal;
}

Interpreter::Flow Interpreter::exec(const Stmt& s, const ScopePtr& scope, std::string& out) {
  step();
  try {
    switch (s.kind) {
      case StmtKind::Text: append(out, s.text); return Flow::Normal;
      case StmtKind::Output: append(out, py_str(eval(*s.expr, scope))); return Flow::Normal;
      case StmtKind::If:
        for (size_t i = 0; i < s.conds.size(); ++i)
          if (eval(*s.conds[i], scope).truthy()) return exec_body(s.bodies[i], scope, out);
        return exec_body(s.else_body, scope, out);
      case StmtKind::For: return exec_for(s, scope, out);
      case StmtKind::Set: exec_set(s, scope); return Flow::Normal;
      case StmtKind::SetBlock: {
        std::string captured;
        exec_body(s.body, child(scope), captured);
        scope->set(s.targets[0], apply_filters(s.filters, Value(std::move(captured)), scope));
        return Flow::Normal;
      }
      case StmtKind::Macro: scope->set(s.text, make_macro(s, scope)); return Flow::Normal;
      case StmtKind::FilterBlock: {
        std::string captured;
        exec_body(s.body, child(scope), captured);
        append(out, py_str(apply_filters(s.filters, Value(std::move(captured)), scope)));
        return Flow::Normal;
      }
      case StmtKind::With: {
        auto w = child(scope);
        for (const auto& [name, e] : s.params) w->set(name, eval(*e, w));
        return exec_body(s.body, w, out);
      }
      case StmtKind::Break: return Flow::Break;
      case StmtKind::Continue: return Flow::Continue;
      case StmtKind::Scope: return exec_body(s.body, scope, out);
    }
  } catch (const TemplateError& e) {
    if (e.line() == 0) throw TemplateError(e.message(), s.line);
    throw;
  }
  return Flow::Normal;
}

void Interpreter::bind(const Stmt& s, const Value& item, Scope& into) {
  if (!s.unpack) {
    into.set(s.targets[0], item);
    return;
  }
  const ValueList parts = iterate(item);
  if (parts.size() > s.targets.size()) raise("too many values to unpack (expected {})", s.targets.size());
  if (parts.size() < s.targets.size())
    raise("not enough values to unpack (expected {}, got {})", s.targets.size(), parts.size());
  for (size_t i = 0; i < parts.size(); ++i) into.set(s.targets[i], parts[i]);
}

Interpreter::Flow Interpreter::exec_for(const Stmt& s, const ScopePtr& scope, std::string& out) {
  run_loop(s, scope, iterate(eval(*s.expr, scope)), 0, out);
  return Flow::Normal;
}

// One level of a for loop over `items` (depth 0 is the loop itself, deeper ones come from
// loop(...) calls of a recursive loop).
void Interpreter::run_loop(const Stmt& s, const ScopePtr& scope, ValueList items, int depth, std::string& out) {
  if (depth >= limits_.max_call_depth) raise("recursive loop nested deeper than {}", limits_.max_call_depth);
  if (s.cond) {
    ValueList kept;
    for (Value& x : items) {
      step();
      auto probe = child(scope);
      bind(s, x, *probe);
      if (eval(*s.cond, probe).truthy()) kept.push_back(std::move(x));
    }
    items = std::move(kept);
  }
  if (items.empty()) {
    if (depth == 0) exec_body(s.else_body, child(scope), out);
    return;
  }
  const int64_t n = static_cast<int64_t>(items.size());
  auto last_changed = std::make_shared<std::pair<bool, Value>>(false, Value());
  for (int64_t i = 0; i < n; ++i) {
    step();
    auto it = child(scope);
    bind(s, items[static_cast<size_t>(i)], *it);
    auto loop = std::make_shared<DictObj>();
    loop->set(Value("index"), Value(i + 1));
    loop->set(Value("index0"), Value(i));
    loop->set(Value("revindex"), Value(n - i));
    loop->set(Value("revindex0"), Value(n - i - 1));
    loop->set(Value("first"), Value(i == 0));
    loop->set(Value("last"), Value(i == n - 1));
    loop->set(Value("length"), Value(n));
    loop->set(Value("depth"), Value(depth + 1));
    loop->set(Value("depth0"), Value(depth));
    loop->set(Value("previtem"), i > 0 ? items[static_cast<size_t>(i - 1)] : Value::undefined("there is no previous item"));
    loop->set(Value("nextitem"), i + 1 < n ? items[static_cast<size_t>(i + 1)] : Value::undefined("there is no next item"));
    loop->set(Value("cycle"), Value::function("cycle", [i](CallArgs& a) {
                if (a.pos.empty()) raise("no items for cycling given");
                return a.pos[static_cast<size_t>(i) % a.pos.size()];
              }));
    loop->set(Value("changed"), Value::function("changed", [last_changed](CallArgs& a) {
                Value now = Value::list(a.pos, true);
                const bool changed = !last_changed->first || !equal(now, last_changed->second);
                *last_changed = {true, std::move(now)};
                return Value(changed);
              }));
    const Stmt* stmt = &s;
    Value lv = Value::function("loop", [this, stmt, scope, depth](CallArgs& a) {
      if (!stmt->recursive) raise("the loop must be marked 'recursive' to be called");
      if (a.pos.size() != 1 || !a.kw.empty()) raise("loop() takes exactly one argument (the items of the next level)");
      std::string sub;
      run_loop(*stmt, scope, iterate(a.pos[0]), depth + 1, sub);
      return Value(std::move(sub));
    });
    const_cast<CallableObj&>(lv.callable()).attrs = std::move(loop);
    it->set("loop", std::move(lv));
    if (exec_body(s.body, it, out) == Flow::Break) break;
  }
}

void Interpreter::exec_set(const Stmt& s, const ScopePtr& scope) {
  Value v = eval(*s.expr, scope);
  if (!s.text.empty()) {  // {% set ns.attr = v %}
    const Value* ns = scope->lookup(s.targets[0]);
    if (!ns || !ns->is_namespace()) raise("cannot assign attribute on non-namespace object");
    ns->dict_obj().set(Value(s.text), std::move(v));
    return;
  }
  bind(s, v, *scope);
}

Value Interpreter::apply_filters(const std::vector<ExprPtr>& filters, Value v, const ScopePtr& scope) {
  for (const auto& f : filters) {
    CallArgs a = eval_args(f->args, scope);
    v = apply_filter(f->name, v, a);
  }
  return v;
}

Value Interpreter::make_macro(const Stmt& s, const ScopePtr& scope) {
  const Stmt* stmt = &s;
  std::weak_ptr<Scope> weak = scope;  // the defining scope holds the macro: a strong ref would be a cycle
  return Value::function(s.text, [this, stmt, weak](CallArgs& a) {
    ScopePtr closure = weak.lock();
    if (!closure) raise("macro '{}' called after its scope ended", stmt->text);
    return call_macro(*stmt, closure, a);
  });
}

Value Interpreter::call_macro(const Stmt& s, const ScopePtr& closure, CallArgs& a) {
  step();
  if (depth_ >= limits_.max_call_depth) raise("macro calls nested deeper than {}", limits_.max_call_depth);
  struct DepthGuard {
    int& d;
    explicit DepthGuard(int& x) : d(++x) {}
    ~DepthGuard() { --d; }
  } guard(depth_);
  auto ms = child(closure);
  const size_t np = s.params.size();
  if (a.pos.size() > np && !s.uses_varargs)
    raise("macro '{}' takes not more than {} argument(s)", s.text, np);
  std::vector<bool> given(np, false);
  for (size_t i = 0; i < np && i < a.pos.size(); ++i) {
    ms->set(s.params[i].first, a.pos[i]);
    given[i] = true;
  }
  DictObj extra_kw;
  for (auto& [k, v] : a.kw) {
    const auto& key = k;  // a structured binding cannot be captured before C++20's P1091 (clang < 16)
    auto it = std::find_if(s.params.begin(), s.params.end(), [&](const auto& p) { return p.first == key; });
    if (it == s.params.end()) {
      if (!s.uses_kwargs) raise("macro '{}' takes no keyword argument '{}'", s.text, k);
      extra_kw.set(Value(k), v);
      continue;
    }
    const size_t i = static_cast<size_t>(it - s.params.begin());
    if (given[i]) raise("macro '{}' got multiple values for argument '{}'", s.text, k);
    ms->set(k, v);
    given[i] = true;
  }
  for (size_t i = 0; i < np; ++i) {
    if (given[i]) continue;
    if (s.params[i].second) ms->set(s.params[i].first, eval(*s.params[i].second, ms));
    else ms->set(s.params[i].first, Value::undefined(fmt::format("parameter '{}' was not provided", s.params[i].first)));
  }
  if (s.uses_varargs) {
    ValueList rest;
    for (size_t i = np; i < a.pos.size(); ++i) rest.push_back(a.pos[i]);
    ms->set("varargs", Value::list(std::move(rest), true));
  }
  if (s.uses_kwargs) ms->set("kwargs", Value::dict(std::move(extra_kw)));
  std::string out;
  exec_body(s.body, ms, out);
  return Value(std::move(out));
}

CallArgs Interpreter::eval_args(const Args& a, const ScopePtr& scope) {
  CallArgs r;
  r.pos.reserve(a.pos.size());
  for (const auto& e : a.pos) r.pos.push_back(eval(*e, scope));
  for (const auto& [k, e] : a.kw) r.kw.emplace_back(k, eval(*e, scope));
  return r;
}

Value Interpreter::eval(const Expr& e, const ScopePtr& scope) {
  try {
    return eval_inner(e, scope);
  } catch (const TemplateError& err) {
    if (err.line() == 0) throw TemplateError(err.message(), e.line);
    throw;
  }
}

Value Interpreter::eval_compare(const Expr& e, const ScopePtr& scope) {
  Value left = eval(*e.items[0], scope);
  for (size_t i = 0; i < e.ops.size(); ++i) {
    Value right = eval(*e.items[i + 1], scope);
    const std::string& op = e.ops[i];
    bool r;
    if (op == "==") r = equal(left, right);
    else if (op == "!=") r = !equal(left, right);
    else if (op == "in") r = contains(right, left);
    else if (op == "notin") r = !contains(right, left);
    else {
      const int c = compare(left, right);
      r = op == "<" ? c < 0 : op == "<=" ? c <= 0 : op == ">" ? c > 0 : c >= 0;
    }
    if (!r) return Value(false);
    left = std::move(right);
  }
  return Value(true);
}

Value Interpreter::eval_slice(const Expr& e, const ScopePtr& scope) {
  const Value obj = eval(*e.a, scope);
  auto part = [&](size_t i) -> Value { return e.items[i] ? eval(*e.items[i], scope) : Value::none(); };
  const Value vs = part(0), ve = part(1), vst = part(2);
  for (const Value* v : {&vs, &ve, &vst})
    if (!v->is_none() && !v->is_int() && !v->is_bool()) raise("slice indices must be integers or None");
  if (obj.is_undefined()) raise_undefined(obj);
  if ((!obj.is_list() && !obj.is_string()) || obj.is_generator())
    raise("'{}' object is not subscriptable with a slice", obj.type_name());
  std::vector<uint32_t> cps;
  const bool ascii = obj.is_string() && is_ascii(obj.str());
  if (obj.is_string() && !ascii) cps = to_code_points(obj.str());
  const int64_t n = obj.is_list() ? static_cast<int64_t>(obj.items().size())
                                  : static_cast<int64_t>(ascii ? obj.str().size() : cps.size());
  const int64_t step = vst.is_none() ? 1 : vst.as_int();
  if (step == 0) raise("slice step cannot be zero");
  auto clamp = [&](const Value& v, int64_t def) {
    if (v.is_none()) return def;
    int64_t x = v.as_int();
    if (x < 0) x += n;
    if (step > 0) return std::clamp<int64_t>(x, 0, n);
    return std::clamp<int64_t>(x, -1, n - 1);
  };
  const int64_t start = clamp(vs, step > 0 ? 0 : n - 1), stop = clamp(ve, step > 0 ? n : -1);
  ValueList out;
  std::string sout;
  for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
    if (obj.is_list()) out.push_back(obj.items()[static_cast<size_t>(i)]);
    else if (ascii) sout += obj.str()[static_cast<size_t>(i)];
    else append_utf8(sout, cps[static_cast<size_t>(i)]);
  }
  if (obj.is_list()) return Value::list(std::move(out), obj.is_tuple());
  return Value(std::move(sout));
}

Value Interpreter::eval_inner(const Expr& e, const ScopePtr& scope) {
  switch (e.kind) {
    case ExprKind::Literal: return e.value;
    case ExprKind::Name: {
      const Value* v = scope->lookup(e.name);
      return v ? *v : Value::undefined(fmt::format("'{}' is undefined", e.name));
    }
    case ExprKind::List:
    case ExprKind::Tuple: {
      ValueList items;
      items.reserve(e.items.size());
      for (const auto& x : e.items) items.push_back(eval(*x, scope));
      return Value::list(std::move(items), e.kind == ExprKind::Tuple);
    }
    case ExprKind::Dict: {
      DictObj d;
      for (size_t i = 0; i < e.keys.size(); ++i) {
        Value k = eval(*e.keys[i], scope);
        if (k.is_list() && !k.is_tuple()) raise("unhashable type: 'list'");
        if (k.is_dict()) raise("unhashable type: 'dict'");
        d.set(k, eval(*e.items[i], scope));
      }
      return Value::dict(std::move(d));
    }
    case ExprKind::GetAttr: return getattr(eval(*e.a, scope), e.name);
    case ExprKind::GetItem: {
      const Value obj = eval(*e.a, scope);
      return getitem(obj, eval(*e.b, scope));
    }
    case ExprKind::Slice: return eval_slice(e, scope);
    case ExprKind::Call: {
      const Value fn = eval(*e.a, scope);
      CallArgs a = eval_args(e.args, scope);
      if (fn.is_undefined()) raise_undefined(fn);
      if (!fn.is_callable()) raise("'{}' object is not callable", fn.type_name());
      return fn.callable().fn(a);
    }
    case ExprKind::Filter: {
      Value v = e.a ? eval(*e.a, scope) : Value();
      CallArgs a = eval_args(e.args, scope);
      return apply_filter(e.name, v, a);
    }
    case ExprKind::Test: {
      const Value v = eval(*e.a, scope);
      CallArgs a = eval_args(e.args, scope);
      return Value(apply_test(e.name, v, a) != e.negated);
    }
    case ExprKind::Neg: return negate(eval(*e.a, scope));
    case ExprKind::Pos: {
      Value v = eval(*e.a, scope);
      if (v.is_undefined()) raise_undefined(v);
      if (!v.is_number()) raise("bad operand type for unary +: '{}'", v.type_name());
      return v.is_bool() ? Value(v.as_int()) : v;
    }
    case ExprKind::Not: return Value(!eval(*e.a, scope).truthy());
    case ExprKind::And: {
      Value l = eval(*e.a, scope);
      return l.truthy() ? eval(*e.b, scope) : l;
    }
    case ExprKind::Or: {
      Value l = eval(*e.a, scope);
      return l.truthy() ? l : eval(*e.b, scope);
    }
    case ExprKind::Binary: {
      const Value l = eval(*e.a, scope);
      return binary_op(e.name, l, eval(*e.b, scope));
    }
    case ExprKind::Compare: return eval_compare(e, scope);
    case ExprKind::Cond:
      if (eval(*e.a, scope).truthy()) return eval(*e.b, scope);
      if (e.c) return eval(*e.c, scope);
      return Value::undefined(fmt::format(
          "the inline if-expression on line {} evaluated to false and no else section was defined.", e.line));
  }
  return Value();
}

namespace {

std::shared_ptr<const Body> parse_source(std::string_view source, const LexOptions& lex_options) {
  try {
    return std::make_shared<const Body>(parse(lex(source, lex_options)));
  } catch (const TemplateError&) {
    throw;
  } catch (const std::exception& e) {  // std::bad_alloc and the like: still a template error
    throw TemplateError(std::string("cannot parse the template: ") + e.what());
  }
}

}  // namespace

Template::Template(std::string_view source, const LexOptions& lex_options) : body_(parse_source(source, lex_options)) {}

std::string Template::render(const Value& context, const RenderLimits& limits) const {
  try {
    return Interpreter(limits).render(*body_, context);
  } catch (const TemplateError&) {
    throw;
  } catch (const std::bad_alloc&) {
    throw TemplateError("out of memory while rendering");
  } catch (const std::exception& e) {
    throw TemplateError(std::string("internal error while rendering: ") + e.what());
  }
}

std::string Template::render(const nlohmann::ordered_json& context, const RenderLimits& limits) const {
  if (!context.is_object() && !context.is_null()) throw TemplateError("the context must be a JSON object");
  return render(Value::from_json(context), limits);
}

std::string render(std::string_view template_text, const nlohmann::ordered_json& context) {
  return Template(template_text).render(context);
}

}  // namespace dsa::jinja
