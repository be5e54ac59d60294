// Parser: tokens -> syntax tree, following jinja2's grammar and operator precedence
// (conditional < or < and < not < comparisons (chained, in, not in) < + - < ~ < * / // % < ** <
// unary - + < postfix (.attr, [index], [a:b:c], call) with filters `|f(...)` and tests
// `is [not] t ...` binding to their unary operand).
// Statements: if/elif/else, for (tuple targets, `if` filter, else), set (names, tuples,
// namespace attributes, block set with filters), macro (defaults, varargs/kwargs), filter
// blocks, with, break/continue (loopcontrols), generation (Hugging Face's assistant-mask tag:
// rendered in place) and block (rendered in place). include/import/extends/call and unknown
// tags are errors naming the tag and its line.
#pragma once
#include <vector>

#include "dsa/chat/jinja/ast.h"
#include "dsa/chat/jinja/lexer.h"

namespace dsa::jinja {

Body parse(const std::vector<Token>& tokens);

}  // namespace dsa::jinja
