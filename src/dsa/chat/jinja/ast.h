// Syntax tree of a parsed template: expressions (Expr) and statements (Stmt), each with its
// source line. Built by the parser, read by the interpreter; immutable after parsing, so one
// parsed template renders concurrently from several threads.
#pragma once
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "dsa/chat/jinja/value.h"

namespace dsa::jinja {

struct Expr;
struct Stmt;
using ExprPtr = std::unique_ptr<Expr>;
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

struct Args {
  std::vector<ExprPtr> pos;
  std::vector<std::pair<std::string, ExprPtr>> kw;
};

enum class ExprKind {
  Literal,    // value
  Name,       // name
  List,       // items
  Tuple,      // items
  Dict,       // keys, items
  GetAttr,    // a.name
  GetItem,    // a[b]
  Slice,      // a[b:c:d] (items: start, stop, step; null = omitted)
  Call,       // a(args)
  Filter,     // a | name(args)
  Test,       // a is [not] name(args)
  Neg,        // -a
  Pos,        // +a
  Not,        // not a
  And,        // a and b
  Or,         // a or b
  Binary,     // a op b (op: + - * / // % ** ~)
  Compare,    // a op1 b op2 c ... (ops: == != < <= > >= in notin)
  Cond,       // b if a else c
};

struct Expr {
  ExprKind kind;
  int line = 0;
  Value value;                // Literal
  std::string name;           // Name, GetAttr, Filter, Test; Binary: the operator
  ExprPtr a, b, c;            // operands (Cond: a = condition, b = then, c = else)
  std::vector<ExprPtr> items;                         // List, Tuple, Dict values, Slice parts, Compare operands
  std::vector<ExprPtr> keys;                          // Dict keys
  std::vector<std::string> ops;                       // Compare operators
  Args args;                                          // Call, Filter, Test
  bool negated = false;                               // Test
  int depth = 1;                                      // height of this subtree (bounded by the parser)
  Expr(ExprKind k, int l) : kind(k), line(l) {}
};

enum class StmtKind {
  Text,      // text
  Output,    // {{ expr }}
  If,        // conds[i] -> bodies[i]; else_body
  For,       // targets in iter [if cond]: body; else_body
  Set,       // targets (or ns.attr) = expr
  SetBlock,  // targets = rendered body [| filters]
  Macro,     // name(params) body
  FilterBlock,
  With,
  Break,
  Continue,
  Scope,     // body rendered in place: {% generation %}, {% block %}
};

struct Stmt {
  StmtKind kind;
  int line = 0;
  std::string text;                      // Text; Macro name; Set: namespace attribute ("" = plain names)
  ExprPtr expr, cond;                    // Output/Set value, For iterable / filter condition
  std::vector<ExprPtr> conds;            // If
  std::vector<Body> bodies;              // If branches
  Body body, else_body;
  std::vector<std::string> targets;      // For / Set names (several: tuple unpacking)
  bool unpack = false;                   // targets came as a tuple (even of one)
  bool recursive = false;                // For: `recursive` (loop(items) renders the body again, one level deeper)
  std::vector<std::pair<std::string, ExprPtr>> params;  // Macro (default may be null); With assignments
  std::vector<ExprPtr> filters;          // SetBlock / FilterBlock: Filter exprs applied to the body (a = null)
  bool uses_varargs = false, uses_kwargs = false;       // Macro
  Stmt(StmtKind k, int l) : kind(k), line(l) {}
};

}  // namespace dsa::jinja
