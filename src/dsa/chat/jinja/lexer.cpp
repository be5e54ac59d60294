#include "dsa/chat/jinja/lexer.h"

#include <cctype>
#include <cerrno>
#include <cstdlib>

#include "dsa/chat/jinja/py_text.h"
#include "dsa/chat/jinja/template_error.h"

namespace dsa::jinja {
namespace {

bool is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }
bool name_start(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool name_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }
bool digit(char c) { return c >= '0' && c <= '9'; }

// \r\n and \r -> \n; one trailing newline dropped (jinja2 does both before lexing).
std::string normalize(std::string_view in) {
  std::string s;
  s.reserve(in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i] == '\r') {
      s += '\n';
      if (i + 1 < in.size() && in[i + 1] == '\n') ++i;
    } else {
      s += in[i];
    }
  }
  if (!s.empty() && s.back() == '\n') s.pop_back();
  return s;
}

int hexval(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Python's "unicode-escape" decoding of a string literal's body.
std::string unescape(std::string_view b, int line) {
  std::string out;
  for (size_t i = 0; i < b.size(); ++i) {
    if (b[i] != '\\' || i + 1 == b.size()) {
      out += b[i];
      continue;
    }
    const char c = b[++i];
    switch (c) {
      case '\n': break;
      case '\\': out += '\\'; break;
      case '\'': out += '\''; break;
      case '"': out += '"'; break;
      case 'a': out += '\a'; break;
      case 'b': out += '\b'; break;
      case 'f': out += '\f'; break;
      case 'n': out += '\n'; break;
      case 'r': out += '\r'; break;
      case 't': out += '\t'; break;
      case 'v': out += '\v'; break;
      case 'x':
      case 'u':
      case 'U': {
        const size_t n = c == 'x' ? 2 : (c == 'u' ? 4 : 8);
        uint32_t cp = 0;
        for (size_t k = 0; k < n; ++k) {
          const int h = i + 1 + k < b.size() ? hexval(b[i + 1 + k]) : -1;
          if (h < 0) raise(line, "invalid \\{} escape in a string literal", c);
          cp = cp * 16 + static_cast<uint32_t>(h);
        }
        if (cp > 0x10FFFF) raise(line, "\\U escape out of range in a string literal");
        append_utf8(out, cp);
        i += n;
        break;
      }
      default:
        if (c >= '0' && c <= '7') {
          uint32_t cp = static_cast<uint32_t>(c - '0');
          for (int k = 0; k < 2 && i + 1 < b.size() && b[i + 1] >= '0' && b[i + 1] <= '7'; ++k)
            cp = cp * 8 + static_cast<uint32_t>(b[++i] - '0');
          append_utf8(out, cp);
        } else if (c == 'N') {
          raise(line, "\\N{{...}} escapes are not supported in string literals");
        } else {
          out += '\\';  // unknown escapes stay as they are, as in Python
          out += c;
        }
    }
  }
  return out;
}

class Lexer {
 public:
  Lexer(std::string_view source, const LexOptions& o) : src_(normalize(source)), o_(o) {}

  std::vector<Token> run() {
    while (pos_ < src_.size()) {
      const size_t start = next_tag(pos_);
      if (start == std::string::npos) {
        text(src_.substr(pos_), line_);
        break;
      }
      const char kind = src_[start + 1];
      char mod = start + 2 < src_.size() ? src_[start + 2] : 0;
      if (mod != '-' && mod != '+') mod = 0;
      std::string before = src_.substr(pos_, start - pos_);
      const int text_line = line_;
      line_ += count_nl(pos_, start);
      left_control(before, mod, kind != '{', line_starting_);
      text(std::move(before), text_line);
      size_t raw_body = 0;
      if (kind == '#') comment(start, mod);
      else if (kind == '%' && raw_begin(start, mod, raw_body)) raw(raw_body);
      else tag(start, kind, mod);
    }
    out_.push_back({Tok::End, "", 0, 0, line_});
    return std::move(out_);
  }

 private:
  size_t next_tag(size_t from) const {
    for (size_t i = src_.find('{', from); i != std::string::npos; i = src_.find('{', i + 1))
      if (i + 1 < src_.size() && (src_[i + 1] == '{' || src_[i + 1] == '%' || src_[i + 1] == '#')) return i;
    return std::string::npos;
  }
  int count_nl(size_t a, size_t b) const {
    int n = 0;
    for (size_t i = a; i < b; ++i) n += src_[i] == '\n';
    return n;
  }
  void text(std::string s, int line) {
    if (!s.empty()) out_.push_back({Tok::Text, std::move(s), 0, 0, line});
  }

  // Whitespace control on the text before a tag (see lexer.h).
  void left_control(std::string& t, char mod, bool block_or_comment, bool line_starting) const {
    if (mod == '-') {
      size_t e = t.size();
      while (e > 0 && is_ws(t[e - 1])) --e;
      t.resize(e);
    } else if (mod != '+' && o_.lstrip_blocks && block_or_comment) {
      const size_t nl = t.rfind('\n');
      const size_t l = nl == std::string::npos ? 0 : nl + 1;
      if (l > 0 || line_starting) {
        bool only_ws = l < t.size();
        for (size_t i = l; i < t.size() && only_ws; ++i) only_ws = is_ws(t[i]);
        if (only_ws) t.resize(l);
      }
    }
  }

  // After a tag ending at `pos_`: `-` eats all whitespace, otherwise trim_blocks eats one newline.
  void right_control(char mod, bool trim) {
    const size_t from = pos_;
    if (mod == '-') {
      while (pos_ < src_.size() && is_ws(src_[pos_])) ++pos_;
    } else if (trim && o_.trim_blocks && pos_ < src_.size() && src_[pos_] == '\n') {
      ++pos_;
    }
    line_ += count_nl(from, pos_);
    line_starting_ = pos_ > 0 && src_[pos_ - 1] == '\n';
  }

  void comment(size_t start, char mod) {
    const size_t close = src_.find("#}", start + 2 + (mod ? 1 : 0));
    if (close == std::string::npos) raise(line_, "missing end of comment tag");
    line_ += count_nl(start, close);
    const char end_mod = close > start + 2 && (src_[close - 1] == '-' || src_[close - 1] == '+') ? src_[close - 1] : 0;
    pos_ = close + 2;
    right_control(end_mod == '-' ? '-' : 0, end_mod != '+');
  }

  // `{%[-+]? raw [-]?%}` at `start`: sets raw_body to the first byte after it.
  bool raw_begin(size_t start, char mod, size_t& raw_body) {
    size_t i = start + 2 + (mod ? 1 : 0);
    while (i < src_.size() && is_ws(src_[i])) ++i;
    if (src_.compare(i, 3, "raw") != 0 || (i + 3 < src_.size() && name_char(src_[i + 3]))) return false;
    i += 3;
    while (i < src_.size() && is_ws(src_[i])) ++i;
    char end_mod = 0;
    if (i < src_.size() && src_[i] == '-') end_mod = '-', ++i;
    if (src_.compare(i, 2, "%}") != 0) return false;
    line_ += count_nl(start, i);
    pos_ = i + 2;
    right_control(end_mod, /*trim=*/false);  // jinja2 applies no trim_blocks after raw
    raw_body = pos_;
    return true;
  }

  void raw(size_t body) {
    for (size_t i = src_.find("{%", body); i != std::string::npos; i = src_.find("{%", i + 1)) {
      size_t k = i + 2;
      char mod = 0;
      if (k < src_.size() && (src_[k] == '-' || src_[k] == '+')) mod = src_[k++];
      while (k < src_.size() && is_ws(src_[k])) ++k;
      if (src_.compare(k, 6, "endraw") != 0 || (k + 6 < src_.size() && name_char(src_[k + 6]))) continue;
      k += 6;
      while (k < src_.size() && is_ws(src_[k])) ++k;
      char end_mod = 0;
      if (k < src_.size() && (src_[k] == '-' || src_[k] == '+')) end_mod = src_[k++];
      if (src_.compare(k, 2, "%}") != 0) continue;
      std::string content = src_.substr(body, i - body);
      left_control(content, mod, true, line_starting_);
      text(std::move(content), line_);
      line_ += count_nl(body, k);
      pos_ = k + 2;
      right_control(end_mod == '-' ? '-' : 0, end_mod != '+');
      return;
    }
    raise(line_, "missing end of raw directive");
  }

  void tag(size_t start, char kind, char mod) {
    const bool var = kind == '{';
    out_.push_back({var ? Tok::VarBegin : Tok::BlockBegin, "", 0, 0, line_});
    size_t i = start + 2 + (mod ? 1 : 0);
    std::vector<char> brackets;
    for (;;) {
      while (i < src_.size() && is_ws(src_[i])) {
        if (src_[i] == '\n') ++line_;
        ++i;
      }
      if (i >= src_.size()) raise(line_, "unexpected end of template: the tag opened here has no {}", var ? "}}" : "%}");
      if (brackets.empty()) {
        const char* close = var ? "}}" : "%}";
        char end_mod = 0;
        if ((src_[i] == '-' || (!var && src_[i] == '+')) && src_.compare(i + 1, 2, close) == 0) end_mod = src_[i];
        if (end_mod || src_.compare(i, 2, close) == 0) {
          pos_ = i + 2 + (end_mod ? 1 : 0);
          out_.push_back({var ? Tok::VarEnd : Tok::BlockEnd, "", 0, 0, line_});
          right_control(end_mod == '-' ? '-' : 0, !var && end_mod != '+');
          return;
        }
      }
      const char c = src_[i];
      if (c == '\'' || c == '"') {
        size_t j = i + 1;
        while (j < src_.size() && src_[j] != c) j += src_[j] == '\\' ? 2 : 1;
        if (j >= src_.size()) raise(line_, "unterminated string literal");
        const int l = line_;
        line_ += count_nl(i, j);
        out_.push_back({Tok::String, unescape(std::string_view(src_).substr(i + 1, j - i - 1), l), 0, 0, l});
        i = j + 1;
      } else if (digit(c)) {
        i = number(i);
      } else if (name_start(c)) {
        size_t j = i;
        while (j < src_.size() && name_char(src_[j])) ++j;
        out_.push_back({Tok::Name, src_.substr(i, j - i), 0, 0, line_});
        i = j;
      } else {
        static const char* two[] = {"//", "**", "==", "!=", "<=", ">="};
        std::string op;
        for (const char* t : two)
          if (src_.compare(i, 2, t) == 0) op = t;
        if (op.empty()) {
          if (std::string_view("+-*/%~<>=()[]{},.:|;").find(c) == std::string_view::npos)
            raise(line_, "unexpected character '{}' in a tag", std::string(1, c));
          op = std::string(1, c);
        }
        if (op == "(" || op == "[" || op == "{") brackets.push_back(op[0]);
        if (op == ")" || op == "]" || op == "}") {
          const char want = op == ")" ? '(' : (op == "]" ? '[' : '{');
          if (brackets.empty() || brackets.back() != want) raise(line_, "unexpected '{}'", op);
          brackets.pop_back();
        }
        out_.push_back({Tok::Op, op, 0, 0, line_});
        i += op.size();
      }
    }
  }

  // Integer `1_000` or float `1.5`, `1e3`, `1.5e-3` (a digit run right after '.' is an integer:
  // `x.0` is an index).
  size_t number(size_t i) {
    auto run = [&](size_t j) {
      while (j < src_.size() && (digit(src_[j]) || (src_[j] == '_' && j + 1 < src_.size() && digit(src_[j + 1])))) ++j;
      return j;
    };
    size_t j = run(i);
    bool is_float = false;
    const bool after_dot = i > 0 && src_[i - 1] == '.';
    if (!after_dot && j + 1 < src_.size() && src_[j] == '.' && digit(src_[j + 1])) {
      j = run(j + 1);
      is_float = true;
    }
    if (!after_dot && j < src_.size() && (src_[j] == 'e' || src_[j] == 'E')) {
      size_t k = j + 1;
      if (k < src_.size() && (src_[k] == '+' || src_[k] == '-')) ++k;
      if (k < src_.size() && digit(src_[k])) {
        j = run(k);
        is_float = true;
      }
    }
    std::string spelled = src_.substr(i, j - i), clean;
    for (char ch : spelled)
      if (ch != '_') clean += ch;
    Token t{is_float ? Tok::Float : Tok::Int, spelled, 0, 0, line_};
    if (is_float) {
      t.fval = std::strtod(clean.c_str(), nullptr);
    } else {
      errno = 0;
      t.ival = std::strtoll(clean.c_str(), nullptr, 10);
      if (errno == ERANGE) raise(line_, "integer literal {} is out of range", spelled);
    }
    out_.push_back(std::move(t));
    return j;
  }

  std::string src_;
  LexOptions o_;
  size_t pos_ = 0;
  int line_ = 1;
  bool line_starting_ = true;
  std::vector<Token> out_;
};

}  // namespace

std::vector<Token> lex(std::string_view source, const LexOptions& options) { return Lexer(source, options).run(); }

}  // namespace dsa::jinja
