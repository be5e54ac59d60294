// Python's arithmetic on template values: + - * / // % ** (numbers; str and list concatenation
// and repetition; `str % args` printf formatting) and unary minus. Integer overflow, division by
// zero and unsupported operand types raise TemplateError (Python raises there too, or would
// leave 64-bit range).
#pragma once
#include <string_view>

#include "dsa/chat/jinja/value.h"

namespace dsa::jinja {

Value binary_op(std::string_view op, const Value& a, const Value& b);
Value negate(const Value& a);
std::string printf_format(const std::string& fmt, const Value& args);  // Python's str % args

}  // namespace dsa::jinja
