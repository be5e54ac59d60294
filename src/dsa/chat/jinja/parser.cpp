#include "dsa/chat/jinja/parser.h"

#include <algorithm>
#include <functional>
#include <initializer_list>
#include <utility>

#include "dsa/chat/jinja/template_error.h"

namespace dsa::jinja {
namespace {

constexpr int kMaxDepth = 200;  // nesting of expressions and blocks (a fuzzer's deep input is an error, not a crash)

class Parser {
 public:
  explicit Parser(const std::vector<Token>& t) : t_(t) {}

  Body run() {
    Body b = body({});
    if (cur().type != Tok::End) raise(cur().line, "unexpected tag");
    return b;
  }

 private:
  // ---- token helpers
  const Token& cur() const { return t_[i_]; }
  const Token& peek(size_t k = 1) const { return t_[std::min(i_ + k, t_.size() - 1)]; }
  void next() {
    if (i_ + 1 < t_.size()) ++i_;
  }
  bool is_op(const char* op) const { return cur().type == Tok::Op && cur().text == op; }
  bool is_name(const char* n) const { return cur().type == Tok::Name && cur().text == n; }
  bool skip_op(const char* op) {
    if (!is_op(op)) return false;
    next();
    return true;
  }
  bool skip_name(const char* n) {
    if (!is_name(n)) return false;
    next();
    return true;
  }
  std::string describe(const Token& t) const {
    switch (t.type) {
      case Tok::Name: return "'" + t.text + "'";
      case Tok::Op: return "'" + t.text + "'";
      case Tok::String: return "a string";
      case Tok::Int:
      case Tok::Float: return "a number";
      case Tok::VarEnd: return "end of print statement '}}'";
      case Tok::BlockEnd: return "end of statement block '%}'";
      case Tok::End: return "end of template";
      default: return "text";
    }
  }
  void expect_op(const char* op) {
    if (!skip_op(op)) raise(cur().line, "expected '{}', got {}", op, describe(cur()));
  }
  std::string expect_name() {
    if (cur().type != Tok::Name) raise(cur().line, "expected a name, got {}", describe(cur()));
    std::string n = cur().text;
    next();
    return n;
  }
  void expect_block_end() {
    if (cur().type != Tok::BlockEnd) raise(cur().line, "expected end of statement block '%}}', got {}", describe(cur()));
    next();
  }
  struct Depth {
    explicit Depth(Parser& p) : p(p) {
      if (++p.depth_ > kMaxDepth) raise(p.cur().line, "template nested too deeply (more than {} levels)", kMaxDepth);
    }
    ~Depth() { --p.depth_; }
    Parser& p;
  };
  ExprPtr make(ExprKind k, int line) { return std::make_unique<Expr>(k, line); }
  // Sets a finished node's height. Long operator or attribute chains parse in loops but make deep
  // trees, which evaluation and destruction walk recursively: their height is bounded too.
  ExprPtr finish(ExprPtr e) {
    int d = 0;
    auto see = [&](const ExprPtr& c) {
      if (c) d = std::max(d, c->depth);
    };
    see(e->a);
    see(e->b);
    see(e->c);
    for (const auto& x : e->items) see(x);
    for (const auto& x : e->keys) see(x);
    for (const auto& x : e->args.pos) see(x);
    for (const auto& x : e->args.kw) see(x.second);
    e->depth = d + 1;
    if (e->depth > kMaxDepth) raise(e->line, "expression nested too deeply (more than {} levels)", kMaxDepth);
    return e;
  }

  // ---- statements
  // Parses until a block tag whose name is one of `ends` (left unconsumed: cur() is that name).
  Body body(std::initializer_list<const char*> ends) {
    Depth d(*this);
    Body out;
    for (;;) {
      const Token& t = cur();
      if (t.type == Tok::End) {
        if (ends.size() == 0) return out;
        raise(t.line, "unexpected end of template: expected {}", list_names(ends));
      }
      if (t.type == Tok::Text) {
        auto s = std::make_unique<Stmt>(StmtKind::Text, t.line);
        s->text = t.text;
        out.push_back(std::move(s));
        next();
      } else if (t.type == Tok::VarBegin) {
        next();
        auto s = std::make_unique<Stmt>(StmtKind::Output, t.line);
        s->expr = tuple_expr(true, {});
        if (cur().type != Tok::VarEnd) raise(cur().line, "expected end of print statement '}}}}', got {}", describe(cur()));
        next();
        out.push_back(std::move(s));
      } else if (t.type == Tok::BlockBegin) {
        const Token& n = peek();
        if (n.type == Tok::Name)
          for (const char* e : ends)
            if (n.text == e) {
              next();  // cur() is now the end name
              return out;
            }
        next();
        out.push_back(statement());
      } else {
        raise(t.line, "unexpected {}", describe(t));
      }
    }
  }
  static std::string list_names(std::initializer_list<const char*> ends) {
    std::string s;
    for (const char* e : ends) s += (s.empty() ? "'" : " or '") + std::string(e) + "'";
    return s;
  }

  StmtPtr statement() {
    const Token& t = cur();
    if (t.type != Tok::Name) raise(t.line, "tag name expected");
    const std::string n = t.text;
    const int line = t.line;
    next();
    if (n == "if") return if_stmt(line);
    if (n == "for") return for_stmt(line);
    if (n == "set") return set_stmt(line);
    if (n == "macro") return macro_stmt(line);
    if (n == "filter") return filter_stmt(line);
    if (n == "with") return with_stmt(line);
    if (n == "break" || n == "continue") {
      if (loops_ == 0) raise(line, "'{}' outside of a for loop", n);
      expect_block_end();
      return std::make_unique<Stmt>(n == "break" ? StmtKind::Break : StmtKind::Continue, line);
    }
    if (n == "generation") {
      expect_block_end();
      auto s = std::make_unique<Stmt>(StmtKind::Scope, line);
      s->body = body({"endgeneration"});
      next();
      expect_block_end();
      return s;
    }
    if (n == "block") {
      expect_name();
      while (is_name("scoped") || is_name("required")) next();
      expect_block_end();
      auto s = std::make_unique<Stmt>(StmtKind::Scope, line);
      s->body = body({"endblock"});
      next();
      if (cur().type == Tok::Name) next();
      expect_block_end();
      return s;
    }
    if (n == "include" || n == "import" || n == "from" || n == "extends")
      raise(line, "'{{% {} %}}' is not supported: a chat template must be one self-contained file", n);
    if (n == "call") raise(line, "'{{% call %}}' blocks (macros with caller()) are not supported");
    if (n == "autoescape") raise(line, "'{{% autoescape %}}' is not supported (chat templates render without escaping)");
    if (n.rfind("end", 0) == 0 || n == "elif" || n == "else")
      raise(line, "unexpected '{}' (no block is open that it could close)", n);
    raise(line, "unknown tag '{}'", n);
  }

  StmtPtr if_stmt(int line) {
    auto s = std::make_unique<Stmt>(StmtKind::If, line);
    s->conds.push_back(tuple_expr(false, {}));
    expect_block_end();
    for (;;) {
      s->bodies.push_back(body({"elif", "else", "endif"}));
      const std::string tag = cur().text;
      next();
      if (tag == "elif") {
        s->conds.push_back(tuple_expr(false, {}));
        expect_block_end();
        continue;
      }
      if (tag == "else") {
        expect_block_end();
        s->else_body = body({"endif"});
        next();
      }
      expect_block_end();
      return s;
    }
  }

  // Assignment targets: a name, or names separated by commas (optionally in parentheses).
  void targets(Stmt& s, const char* stop) {
    const bool paren = skip_op("(");
    for (;;) {
      s.targets.push_back(expect_name());
      if (!skip_op(",")) break;
      s.unpack = true;
      if ((paren && is_op(")")) || is_name(stop) || is_op("=")) break;
    }
    if (paren) {
      expect_op(")");
      s.unpack = true;
    }
  }

  StmtPtr for_stmt(int line) {
    auto s = std::make_unique<Stmt>(StmtKind::For, line);
    targets(*s, "in");
    if (!skip_name("in")) raise(cur().line, "expected 'in' in the for loop, got {}", describe(cur()));
    s->expr = tuple_expr(false, {"recursive"});
    if (skip_name("if")) s->cond = expression(true);
    s->recursive = skip_name("recursive");
    expect_block_end();
    ++loops_;
    s->body = body({"endfor", "else"});
    --loops_;
    const std::string tag = cur().text;
    next();
    if (tag == "else") {
      expect_block_end();
      s->else_body = body({"endfor"});
      next();
    }
    expect_block_end();
    return s;
  }

  StmtPtr set_stmt(int line) {
    // `set ns.attr = ...` or `set a` / `set a, b`
    if (cur().type == Tok::Name && peek().type == Tok::Op && peek().text == "." && peek(2).type == Tok::Name) {
      auto s = std::make_unique<Stmt>(StmtKind::Set, line);
      s->targets.push_back(cur().text);
      s->text = peek(2).text;
      next();
      next();
      next();
      expect_op("=");
      s->expr = tuple_expr(true, {});
      expect_block_end();
      return s;
    }
    auto s = std::make_unique<Stmt>(StmtKind::Set, line);
    targets(*s, "");
    if (skip_op("=")) {
      s->expr = tuple_expr(true, {});
      expect_block_end();
      return s;
    }
    if (s->unpack) raise(cur().line, "a block set takes one name");
    s->kind = StmtKind::SetBlock;
    while (skip_op("|")) s->filters.push_back(filter_call(nullptr));
    expect_block_end();
    s->body = body({"endset"});
    next();
    expect_block_end();
    return s;
  }

  StmtPtr macro_stmt(int line) {
    auto s = std::make_unique<Stmt>(StmtKind::Macro, line);
    s->text = expect_name();
    expect_op("(");
    while (!is_op(")")) {
      if (!s->params.empty()) expect_op(",");
      if (is_op(")")) break;
      std::string p = expect_name();
      ExprPtr def;
      if (skip_op("=")) def = expression(true);
      else if (!s->params.empty() && s->params.back().second)
        raise(cur().line, "macro '{}': non-default argument '{}' follows a default argument", s->text, p);
      s->params.emplace_back(std::move(p), std::move(def));
    }
    next();
    expect_block_end();
    const int outer_loops = std::exchange(loops_, 0);  // a macro body is not inside the caller's loop
    s->body = body({"endmacro"});
    loops_ = outer_loops;
    next();
    if (cur().type == Tok::Name) next();  // {% endmacro name %}
    expect_block_end();
    s->uses_varargs = mentions(s->body, "varargs");
    s->uses_kwargs = mentions(s->body, "kwargs");
    if (mentions(s->body, "caller")) raise(line, "macro '{}' uses caller(): call blocks are not supported", s->text);
    return s;
  }

  StmtPtr filter_stmt(int line) {
    auto s = std::make_unique<Stmt>(StmtKind::FilterBlock, line);
    do s->filters.push_back(filter_call(nullptr));
    while (skip_op("|"));
    expect_block_end();
    s->body = body({"endfilter"});
    next();
    expect_block_end();
    return s;
  }

  StmtPtr with_stmt(int line) {
    auto s = std::make_unique<Stmt>(StmtKind::With, line);
    while (cur().type != Tok::BlockEnd) {
      if (!s->params.empty()) expect_op(",");
      std::string n = expect_name();
      expect_op("=");
      s->params.emplace_back(std::move(n), expression(true));
    }
    expect_block_end();
    s->body = body({"endwith"});
    next();
    expect_block_end();
    return s;
  }

  // Whether `name` is read anywhere in a body (macros: varargs / kwargs / caller).
  static bool mentions(const Body& b, const std::string& name) {
    std::function<bool(const Expr*)> ex = [&](const Expr* e) -> bool {
      if (!e) return false;
      if (e->kind == ExprKind::Name && e->name == name) return true;
      if (ex(e->a.get()) || ex(e->b.get()) || ex(e->c.get())) return true;
      for (const auto& x : e->items)
        if (ex(x.get())) return true;
      for (const auto& x : e->keys)
        if (ex(x.get())) return true;
      for (const auto& x : e->args.pos)
        if (ex(x.get())) return true;
      for (const auto& x : e->args.kw)
        if (ex(x.second.get())) return true;
      return false;
    };
    std::function<bool(const Body&)> st = [&](const Body& body) -> bool {
      for (const auto& s : body) {
        if (ex(s->expr.get()) || ex(s->cond.get())) return true;
        for (const auto& c : s->conds)
          if (ex(c.get())) return true;
        for (const auto& bb : s->bodies)
          if (st(bb)) return true;
        for (const auto& p : s->params)
          if (ex(p.second.get())) return true;
        for (const auto& f : s->filters)
          if (ex(f.get())) return true;
        if (s->kind != StmtKind::Macro && (st(s->body) || st(s->else_body))) return true;
      }
      return false;
    };
    return st(b);
  }

  // ---- expressions
  bool tuple_end(std::initializer_list<const char*> extra) const {
    const Token& t = cur();
    if (t.type == Tok::VarEnd || t.type == Tok::BlockEnd || t.type == Tok::End) return true;
    if (t.type == Tok::Op && t.text == ")") return true;
    if (t.type == Tok::Name)
      for (const char* e : extra)
        if (t.text == e) return true;
    return false;
  }

  // Comma-separated expressions; one without a comma is itself, several are a tuple.
  ExprPtr tuple_expr(bool with_cond, std::initializer_list<const char*> extra, bool parens = false) {
    const int line = cur().line;
    std::vector<ExprPtr> items;
    bool is_tuple = false;
    for (;;) {
      if (!items.empty()) expect_op(",");
      if (tuple_end(extra)) break;
      items.push_back(expression(with_cond));
      if (is_op(",")) is_tuple = true;
      else break;
    }
    if (!is_tuple) {
      if (!items.empty()) return std::move(items[0]);
      if (!parens) raise(cur().line, "expected an expression, got {}", describe(cur()));
    }
    auto e = make(ExprKind::Tuple, line);
    e->items = std::move(items);
    return finish(std::move(e));
  }

  ExprPtr expression(bool with_cond) {
    Depth d(*this);
    return with_cond ? cond_expr() : or_expr();
  }

  ExprPtr cond_expr() {
    ExprPtr e = or_expr();
    while (is_name("if")) {
      const int line = cur().line;
      next();
      auto c = make(ExprKind::Cond, line);
      c->a = or_expr();
      c->b = std::move(e);
      if (skip_name("else")) c->c = cond_expr();
      e = finish(std::move(c));
    }
    return e;
  }

  ExprPtr binary_chain(ExprKind k, const char* word, ExprPtr (Parser::*operand)()) {
    ExprPtr e = (this->*operand)();
    while (is_name(word)) {
      const int line = cur().line;
      next();
      auto n = make(k, line);
      n->a = std::move(e);
      n->b = (this->*operand)();
      e = finish(std::move(n));
    }
    return e;
  }
  ExprPtr or_expr() { return binary_chain(ExprKind::Or, "or", &Parser::and_expr); }
  ExprPtr and_expr() { return binary_chain(ExprKind::And, "and", &Parser::not_expr); }

  ExprPtr not_expr() {
    if (is_name("not")) {
      Depth d(*this);
      const int line = cur().line;
      next();
      auto n = make(ExprKind::Not, line);
      n->a = not_expr();
      return finish(std::move(n));
    }
    return compare();
  }

  ExprPtr compare() {
    const int line = cur().line;
    ExprPtr first = math1();
    std::vector<std::string> ops;
    std::vector<ExprPtr> rest;
    for (;;) {
      if (cur().type == Tok::Op && (cur().text == "==" || cur().text == "!=" || cur().text == "<" ||
                                    cur().text == "<=" || cur().text == ">" || cur().text == ">=")) {
        ops.push_back(cur().text);
        next();
      } else if (is_name("in")) {
        ops.push_back("in");
        next();
      } else if (is_name("not") && peek().type == Tok::Name && peek().text == "in") {
        ops.push_back("notin");
        next();
        next();
      } else {
        break;
      }
      rest.push_back(math1());
    }
    if (ops.empty()) return first;
    auto c = make(ExprKind::Compare, line);
    c->items.push_back(std::move(first));
    for (auto& r : rest) c->items.push_back(std::move(r));
    c->ops = std::move(ops);
    return finish(std::move(c));
  }

  ExprPtr binop(ExprPtr l, const std::string& op, ExprPtr r, int line) {
    auto n = make(ExprKind::Binary, line);
    n->name = op;
    n->a = std::move(l);
    n->b = std::move(r);
    return finish(std::move(n));
  }

  ExprPtr math1() {
    ExprPtr e = concat();
    while (is_op("+") || is_op("-")) {
      const std::string op = cur().text;
      const int line = cur().line;
      next();
      e = binop(std::move(e), op, concat(), line);
    }
    return e;
  }

  ExprPtr concat() {
    ExprPtr e = math2();
    while (is_op("~")) {
      const int line = cur().line;
      next();
      e = binop(std::move(e), "~", math2(), line);
    }
    return e;
  }

  ExprPtr math2() {
    ExprPtr e = power();
    while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
      const std::string op = cur().text;
      const int line = cur().line;
      next();
      e = binop(std::move(e), op, power(), line);
    }
    return e;
  }

  ExprPtr power() {
    ExprPtr e = unary(true);
    while (is_op("**")) {
      const int line = cur().line;
      next();
      e = binop(std::move(e), "**", unary(true), line);
    }
    return e;
  }

  ExprPtr unary(bool with_filter) {
    Depth d(*this);
    const int line = cur().line;
    ExprPtr e;
    if (is_op("-") || is_op("+")) {
      const bool neg = cur().text == "-";
      next();
      e = make(neg ? ExprKind::Neg : ExprKind::Pos, line);
      e->a = unary(false);
      e = finish(std::move(e));
    } else {
      e = primary();
    }
    e = postfix(std::move(e));
    if (with_filter) e = filter_expr(std::move(e));
    return e;
  }

  ExprPtr primary() {
    const Token& t = cur();
    const int line = t.line;
    if (t.type == Tok::Name) {
      const std::string n = t.text;
      next();
      auto e = make(ExprKind::Literal, line);
      if (n == "true" || n == "True") e->value = Value(true);
      else if (n == "false" || n == "False") e->value = Value(false);
      else if (n == "none" || n == "None") e->value = Value::none();
      else {
        e->kind = ExprKind::Name;
        e->name = n;
      }
      return e;
    }
    if (t.type == Tok::String) {
      std::string s;
      while (cur().type == Tok::String) {
        s += cur().text;
        next();
      }
      auto e = make(ExprKind::Literal, line);
      e->value = Value(std::move(s));
      return e;
    }
    if (t.type == Tok::Int || t.type == Tok::Float) {
      auto e = make(ExprKind::Literal, line);
      e->value = t.type == Tok::Int ? Value(t.ival) : Value(t.fval);
      next();
      return e;
    }
    if (skip_op("(")) {
      ExprPtr e = tuple_expr(true, {}, true);
      expect_op(")");
      return e;
    }
    if (skip_op("[")) {
      auto e = make(ExprKind::List, line);
      while (!is_op("]")) {
        if (!e->items.empty()) expect_op(",");
        if (is_op("]")) break;
        e->items.push_back(expression(true));
      }
      next();
      return finish(std::move(e));
    }
    if (skip_op("{")) {
      auto e = make(ExprKind::Dict, line);
      while (!is_op("}")) {
        if (!e->items.empty()) expect_op(",");
        if (is_op("}")) break;
        e->keys.push_back(expression(true));
        expect_op(":");
        e->items.push_back(expression(true));
      }
      next();
      return finish(std::move(e));
    }
    raise(line, "unexpected {}", describe(t));
  }

  ExprPtr postfix(ExprPtr e) {
    for (;;) {
      const int line = cur().line;
      if (is_op(".")) {
        next();
        if (cur().type == Tok::Name) {
          auto g = make(ExprKind::GetAttr, line);
          g->a = std::move(e);
          g->name = cur().text;
          next();
          e = finish(std::move(g));
        } else if (cur().type == Tok::Int) {
          auto g = make(ExprKind::GetItem, line);
          g->a = std::move(e);
          g->b = make(ExprKind::Literal, line);
          g->b->value = Value(cur().ival);
          next();
          e = finish(std::move(g));
        } else {
          raise(line, "expected a name after '.', got {}", describe(cur()));
        }
      } else if (is_op("[")) {
        next();
        e = subscript(std::move(e), line);
      } else if (is_op("(")) {
        e = call(std::move(e));
      } else {
        return e;
      }
    }
  }

  ExprPtr subscript(ExprPtr obj, int line) {
    std::vector<ExprPtr> parts;  // several: a tuple key
    ExprPtr slice;
    for (;;) {
      if (!parts.empty()) expect_op(",");
      if (is_op("]")) break;
      ExprPtr start, stop, step;
      bool is_slice = false;
      if (!is_op(":")) start = expression(true);
      if (skip_op(":")) {
        is_slice = true;
        if (!is_op("]") && !is_op(",") && !is_op(":")) stop = expression(true);
        if (skip_op(":") && !is_op("]") && !is_op(",")) step = expression(true);
      }
      if (is_slice) {
        auto s = make(ExprKind::Slice, line);
        s->items.push_back(std::move(start));
        s->items.push_back(std::move(stop));
        s->items.push_back(std::move(step));
        parts.push_back(std::move(s));
      } else {
        parts.push_back(std::move(start));
      }
      if (!is_op(",")) break;
    }
    expect_op("]");
    if (parts.size() == 1 && parts[0] && parts[0]->kind == ExprKind::Slice) {
      parts[0]->a = std::move(obj);
      return finish(std::move(parts[0]));
    }
    auto g = make(ExprKind::GetItem, line);
    g->a = std::move(obj);
    if (parts.size() == 1) {
      g->b = std::move(parts[0]);
    } else {
      g->b = make(ExprKind::Tuple, line);
      for (auto& p : parts) {
        if (p->kind == ExprKind::Slice) raise(line, "slices inside a tuple index are not supported");
        g->b->items.push_back(std::move(p));
      }
      g->b = finish(std::move(g->b));
    }
    return finish(std::move(g));
  }

  void call_args(Args& a) {
    expect_op("(");
    while (!is_op(")")) {
      if (!a.pos.empty() || !a.kw.empty()) expect_op(",");
      if (is_op(")")) break;
      if (is_op("*") || is_op("**")) raise(cur().line, "*args / **kwargs in calls are not supported");
      if (cur().type == Tok::Name && peek().type == Tok::Op && peek().text == "=") {
        std::string k = cur().text;
        next();
        next();
        a.kw.emplace_back(std::move(k), expression(true));
      } else {
        if (!a.kw.empty()) raise(cur().line, "positional argument after a keyword argument");
        a.pos.push_back(expression(true));
      }
    }
    next();
  }

  ExprPtr call(ExprPtr fn) {
    auto c = make(ExprKind::Call, cur().line);
    c->a = std::move(fn);
    call_args(c->args);
    return finish(std::move(c));
  }

  std::string dotted_name() {
    std::string n = expect_name();
    while (is_op(".") && peek().type == Tok::Name) {
      next();
      n += "." + cur().text;
      next();
    }
    return n;
  }

  // `name` or `name(args)` after '|'; `obj` may be null (filter blocks / block set).
  ExprPtr filter_call(ExprPtr obj) {
    auto f = make(ExprKind::Filter, cur().line);
    f->a = std::move(obj);
    f->name = dotted_name();
    if (is_op("(")) call_args(f->args);
    return finish(std::move(f));
  }

  ExprPtr filter_expr(ExprPtr e) {
    for (;;) {
      if (skip_op("|")) {
        e = filter_call(std::move(e));
      } else if (is_name("is")) {
        const int line = cur().line;
        next();
        auto t = make(ExprKind::Test, line);
        t->a = std::move(e);
        t->negated = skip_name("not");
        t->name = dotted_name();
        if (is_op("(")) {
          call_args(t->args);
        } else if ((cur().type == Tok::Name || cur().type == Tok::String || cur().type == Tok::Int ||
                    cur().type == Tok::Float || is_op("(") || is_op("[") || is_op("{")) &&
                   !is_name("else") && !is_name("or") && !is_name("and")) {
          if (is_name("is")) raise(cur().line, "you cannot chain multiple tests with 'is'");
          t->args.pos.push_back(postfix(primary()));
        }
        e = finish(std::move(t));
      } else if (is_op("(")) {
        e = call(std::move(e));
      } else {
        return e;
      }
    }
  }

  const std::vector<Token>& t_;
  size_t i_ = 0;
  int depth_ = 0;
  int loops_ = 0;  // for loops around the current position (break / continue need one)
};

}  // namespace

Body parse(const std::vector<Token>& tokens) { return Parser(tokens).run(); }

}  // namespace dsa::jinja
