// Interpreter: renders a parsed template (ast.h) against a context. Scoping follows jinja2:
// the template level is one scope; each for-loop iteration, macro call, with / filter / block-set
// body gets a child scope, so `set` inside them does not leak out (namespace() objects carry
// state out of loops); `if` opens no scope. Macros close over the scope they are defined in.
#pragma once
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "dsa/chat/jinja/ast.h"
#include "dsa/chat/jinja/jinja.h"

namespace dsa::jinja {

struct Scope {
  std::vector<std::pair<std::string, Value>> vars;
  std::shared_ptr<Scope> parent;
  const Value* lookup(const std::string& name) const;
  void set(const std::string& name, Value v);
};
using ScopePtr = std::shared_ptr<Scope>;

class Interpreter {
 public:
  explicit Interpreter(const RenderLimits& limits) : limits_(limits) {}
  std::string render(const Body& body, const Value& context);

 private:
  enum class Flow { Normal, Break, Continue };
  Flow exec_body(const Body& body, const ScopePtr& scope, std::string& out);
  Flow exec(const Stmt& s, const ScopePtr& scope, std::string& out);
  Flow exec_for(const Stmt& s, const ScopePtr& scope, std::string& out);
  void run_loop(const Stmt& s, const ScopePtr& scope, ValueList items, int depth, std::string& out);
  void exec_set(const Stmt& s, const ScopePtr& scope);
  Value eval(const Expr& e, const ScopePtr& scope);
  Value eval_inner(const Expr& e, const ScopePtr& scope);
  Value eval_compare(const Expr& e, const ScopePtr& scope);
  Value eval_slice(const Expr& e, const ScopePtr& scope);
  CallArgs eval_args(const Args& a, const ScopePtr& scope);
  Value apply_filters(const std::vector<ExprPtr>& filters, Value v, const ScopePtr& scope);
  Value make_macro(const Stmt& s, const ScopePtr& scope);
  Value call_macro(const Stmt& s, const ScopePtr& closure, CallArgs& args);
  void bind(const Stmt& s, const Value& item, Scope& into);
  void step();
  void append(std::string& out, const std::string& s);

  RenderLimits limits_;
  int64_t steps_ = 0;
  int depth_ = 0;
};

}  // namespace dsa::jinja
