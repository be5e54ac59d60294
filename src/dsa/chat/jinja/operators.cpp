#include "dsa/chat/jinja/operators.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>

#include "dsa/chat/jinja/builtins.h"
#include "dsa/chat/jinja/py_text.h"
#include "dsa/chat/jinja/template_error.h"

namespace dsa::jinja {
namespace {

[[noreturn]] void unsupported(std::string_view op, const Value& a, const Value& b) {
  if (a.is_undefined()) raise_undefined(a);
  if (b.is_undefined()) raise_undefined(b);
  if (op == "+" && a.is_string()) raise("can only concatenate str (not \"{}\") to str", b.type_name());
  raise("unsupported operand type(s) for {}: '{}' and '{}'", op, a.type_name(), b.type_name());
}

// a op b in int64, or an error where Python's integers would leave that range.
template <typename Op>
int64_t checked(Op op, int64_t a, int64_t b) {
  int64_t r = 0;
  if (op(a, b, &r)) raise("integer result out of the 64-bit range (dsa's templates use 64-bit integers)");
  return r;
}
constexpr auto add_ovf = [](int64_t a, int64_t b, int64_t* r) { return __builtin_add_overflow(a, b, r); };
constexpr auto sub_ovf = [](int64_t a, int64_t b, int64_t* r) { return __builtin_sub_overflow(a, b, r); };
constexpr auto mul_ovf = [](int64_t a, int64_t b, int64_t* r) { return __builtin_mul_overflow(a, b, r); };

Value repeat(const Value& seq, int64_t n) {
  if (n < 0) n = 0;
  if (seq.is_string()) {
    if (n > 0 && seq.str().size() * static_cast<size_t>(n) > (64u << 20)) raise("string repetition too large");
    std::string out;
    for (int64_t i = 0; i < n; ++i) out += seq.str();
    return seq.is_markup() ? Value::markup(out) : Value(out);
  }
  if (n > 0 && seq.items().size() * static_cast<size_t>(n) > (1u << 22)) raise("list repetition too large");
  ValueList out;
  for (int64_t i = 0; i < n; ++i) out.insert(out.end(), seq.items().begin(), seq.items().end());
  return Value::list(std::move(out), seq.is_tuple());
}

double floor_div(double x, double y) { return std::floor(x / y); }

}  // namespace

Value negate(const Value& a) {
  if (a.is_float()) return Value(-a.as_float());
  if (a.is_int() || a.is_bool()) return Value(checked(sub_ovf, 0, a.as_int()));
  if (a.is_undefined()) raise_undefined(a);
  raise("bad operand type for unary -: '{}'", a.type_name());
}

Value binary_op(std::string_view op, const Value& a, const Value& b) {
  if (op == "~") return Value(py_str(a) + py_str(b));
  const bool nums = a.is_number() && b.is_number();
  const bool ints = nums && !a.is_float() && !b.is_float();
  if (op == "+") {
    if (ints) return Value(checked(add_ovf, a.as_int(), b.as_int()));
    if (nums) return Value(a.as_number() + b.as_number());
    if (a.is_string() && b.is_string()) {
      if (!a.is_markup() && !b.is_markup()) return Value(a.str() + b.str());
      return Value::markup((a.is_markup() ? a.str() : html_escape(a.str())) + (b.is_markup() ? b.str() : html_escape(b.str())));
    }
    if (a.is_list() && b.is_list() && a.is_tuple() == b.is_tuple()) {
      ValueList out = a.items();
      out.insert(out.end(), b.items().begin(), b.items().end());
      return Value::list(std::move(out), a.is_tuple());
    }
  } else if (op == "-") {
    if (ints) return Value(checked(sub_ovf, a.as_int(), b.as_int()));
    if (nums) return Value(a.as_number() - b.as_number());
  } else if (op == "*") {
    if (ints) return Value(checked(mul_ovf, a.as_int(), b.as_int()));
    if (nums) return Value(a.as_number() * b.as_number());
    if ((a.is_string() || a.is_list()) && (b.is_int() || b.is_bool())) return repeat(a, b.as_int());
    if ((b.is_string() || b.is_list()) && (a.is_int() || a.is_bool())) return repeat(b, a.as_int());
  } else if (op == "/") {
    if (nums) {
      if (b.as_number() == 0) raise("division by zero");
      return Value(a.as_number() / b.as_number());
    }
  } else if (op == "//") {
    if (ints) {
      if (b.as_int() == 0) raise("integer division or modulo by zero");
      if (a.as_int() == INT64_MIN && b.as_int() == -1) raise("integer result out of the 64-bit range");
      int64_t q = a.as_int() / b.as_int();
      if ((a.as_int() % b.as_int() != 0) && ((a.as_int() < 0) != (b.as_int() < 0))) --q;
      return Value(q);
    }
    if (nums) {
      if (b.as_number() == 0) raise("float floor division by zero");
      return Value(floor_div(a.as_number(), b.as_number()));
    }
  } else if (op == "%") {
    if (a.is_markup()) {  // Markup % args escapes the arguments
      ValueList args = b.is_tuple() ? b.items() : ValueList{b};
      for (Value& x : args)
        if (!x.is_number() && !x.is_markup()) x = Value::markup(html_escape(py_str(x)));
      return Value::markup(printf_format(a.str(), b.is_tuple() ? Value::list(std::move(args), true) : args[0]));
    }
    if (a.is_string()) return Value(printf_format(a.str(), b));
    if (ints) {
      if (b.as_int() == 0) raise("integer division or modulo by zero");
      if (b.as_int() == -1) return Value(int64_t{0});
      int64_t m = a.as_int() % b.as_int();
      if (m != 0 && ((m < 0) != (b.as_int() < 0))) m += b.as_int();
      return Value(m);
    }
    if (nums) {
      const double y = b.as_number();
      if (y == 0) raise("float modulo");
      double m = std::fmod(a.as_number(), y);
      if (m != 0 && ((m < 0) != (y < 0))) m += y;
      return Value(m);
    }
  } else if (op == "**") {
    if (ints && b.as_int() >= 0) {
      int64_t base = a.as_int(), e = b.as_int(), acc = 1;
      while (e > 0) {
        if (e & 1) acc = checked(mul_ovf, acc, base);
        e >>= 1;
        if (e > 0) base = checked(mul_ovf, base, base);
      }
      return Value(acc);
    }
    if (nums) {
      if (a.as_number() == 0 && b.as_number() < 0) raise("0.0 cannot be raised to a negative power");
      return Value(std::pow(a.as_number(), b.as_number()));
    }
  }
  unsupported(op, a, b);
}

std::string printf_format(const std::string& f, const Value& args) {
  ValueList vals = args.is_tuple() ? args.items() : ValueList{args};
  size_t next = 0;
  std::string out;
  for (size_t i = 0; i < f.size(); ++i) {
    if (f[i] != '%') {
      out += f[i];
      continue;
    }
    if (++i >= f.size()) raise("incomplete format");
    std::string spec = "%";
    while (i < f.size() && std::string_view("-+ #0123456789.").find(f[i]) != std::string_view::npos) spec += f[i++];
    if (i >= f.size()) raise("incomplete format");
    const char conv = f[i];
    if (conv == '%') {
      out += '%';
      continue;
    }
    if (next >= vals.size()) raise("not enough arguments for format string");
    const Value& v = vals[next++];
    char buf[512];
    if (conv == 's' || conv == 'r') {
      std::string s = conv == 's' ? py_str(v) : py_repr(v);
      const bool left = spec.find('-') != std::string::npos;
      const size_t dot = spec.find('.');
      size_t width = 0;
      for (size_t k = 1; k < std::min(dot, spec.size()); ++k)
        if (spec[k] >= '0' && spec[k] <= '9') width = width * 10 + static_cast<size_t>(spec[k] - '0');
      if (dot != std::string::npos) {
        const auto cp = to_code_points(s);
        const size_t prec = static_cast<size_t>(std::atoi(spec.c_str() + dot + 1));
        if (prec < cp.size()) s = from_code_points(cp.data(), prec);
      }
      const size_t n = code_point_count(s);
      if (n < width) s = left ? s + std::string(width - n, ' ') : std::string(width - n, ' ') + s;
      out += s;
    } else if (conv == 'd' || conv == 'i' || conv == 'x' || conv == 'X' || conv == 'o') {
      if (!v.is_number()) raise("%{} format: a real number is required, not {}", conv, v.type_name());
      long long x = 0;
      if (v.is_float()) {
        // Python raises for these too (NaN, +-inf); a float beyond 64 bits would be a big int in
        // Python, which this engine has no room for: refused rather than cast out of range.
        const double fv = v.as_float();
        if (std::isnan(fv)) raise("cannot convert float NaN to integer");
        if (std::isinf(fv)) raise("cannot convert float infinity to integer");
        if (!(fv > -9.2233720368547758e18 && fv < 9.2233720368547758e18))
          raise("%{} format: {} is outside the 64-bit integer range", conv, fv);
        x = static_cast<long long>(fv);
      } else {
        x = v.as_int();
      }
      std::snprintf(buf, sizeof buf, (spec + "ll" + (conv == 'i' ? 'd' : conv)).c_str(), x);
      out += buf;
    } else if (conv == 'f' || conv == 'F' || conv == 'e' || conv == 'E' || conv == 'g' || conv == 'G') {
      if (!v.is_number()) raise("must be real number, not {}", v.type_name());
      std::snprintf(buf, sizeof buf, (spec + conv).c_str(), v.as_number());
      out += buf;
    } else {
      raise("unsupported format character '{}'", std::string(1, conv));
    }
  }
  if (next < vals.size() && args.is_tuple()) raise("not all arguments converted during string formatting");
  return out;
}

}  // namespace dsa::jinja
