// Lexer: template text -> tokens, with jinja2's whitespace rules applied to the text tokens.
//  - Newlines are normalised to \n and one trailing newline is dropped (keep_trailing_newline
//    off, jinja2's default).
//  - `{{- ... -}}`, `{%- ... -%}`, `{#- ... -#}` strip all whitespace before / after the tag.
//  - trim_blocks: the first newline after a block tag or comment is removed (`+%}` keeps it).
//  - lstrip_blocks: spaces and tabs between the start of a line and a block tag or comment are
//    removed (`{%+` keeps them); never before `{{`.
//  Hugging Face renders chat templates with trim_blocks and lstrip_blocks on, so both default on.
//  - `{% raw %}...{% endraw %}` becomes one text token; comments produce no token.
// Inside tags: names, strings (Python escapes), integers, floats and operators; a tag ends at
// `}}` / `%}` only outside brackets (so `{{ {'a': 1}}}` works, as in jinja2).
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace dsa::jinja {

enum class Tok : uint8_t { Text, VarBegin, VarEnd, BlockBegin, BlockEnd, Name, String, Int, Float, Op, End };

struct Token {
  Tok type = Tok::End;
  std::string text;  // Text, Name, String (decoded), Op; the source spelling of numbers
  int64_t ival = 0;
  double fval = 0;
  int line = 1;
};

struct LexOptions {
  bool trim_blocks = true;
  bool lstrip_blocks = true;
};

std::vector<Token> lex(std::string_view source, const LexOptions& options = {});

}  // namespace dsa::jinja
