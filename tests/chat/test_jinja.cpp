// The Jinja engine beyond what the differential test against jinja2 covers (that one:
// tests/chat/jinja_differential.py under ctest): errors name the template line, rendering is
// bounded (steps, output, nesting, recursion), one parsed template renders from many threads,
// and random input only ever ends in a TemplateError.
#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

#include "common/testing.h"
#include "dsa/chat/jinja/jinja.h"

namespace dsa::jinja {
namespace {

using ojson = nlohmann::ordered_json;
using test::error_of;

std::string r(const std::string& t, const ojson& ctx = ojson::object()) { return render(t, ctx); }

TEST(Jinja, RendersBasicChatTemplate) {
  const ojson ctx = {{"messages", {{{"role", "user"}, {"content", "hi"}}, {{"role", "assistant"}, {"content", "yo"}}}},
                     {"add_generation_prompt", true}};
  EXPECT_EQ(r("{% for m in messages %}<{{ m.role }}>{{ m.content }}\n{% endfor %}{% if add_generation_prompt %}<assistant>{% endif %}",
              ctx),
            "<user>hi\n<assistant>yo\n<assistant>");
}

TEST(Jinja, SyntaxErrorsNameTheLine) {
  EXPECT_EQ(error_of([] { r("line 1\n{% if x %}\n{{ 1 + }}\n{% endif %}"); }),
            "chat template line 3: unexpected end of print statement '}}'");
  EXPECT_EQ(error_of([] { r("a\nb\n{% include 'other.jinja' %}"); }),
            "chat template line 3: '{% include %}' is not supported: a chat template must be one self-contained file");
  EXPECT_EQ(error_of([] { r("{% for x in y %}\n{{ x }}\n"); }),
            "chat template line 2: unexpected end of template: expected 'endfor' or 'else'");
  EXPECT_EQ(error_of([] { r("\n\n{% unknown_tag %}"); }), "chat template line 3: unknown tag 'unknown_tag'");
  EXPECT_EQ(error_of([] { r("x\n{% break %}"); }), "chat template line 2: 'break' outside of a for loop");
  EXPECT_EQ(error_of([] { r("{{ 'open }}"); }), "chat template line 1: unterminated string literal");
  EXPECT_EQ(error_of([] { r("{% macro m() %}{{ caller() }}{% endmacro %}"); }),
            "chat template line 1: macro 'm' uses caller(): call blocks are not supported");
}

TEST(Jinja, RuntimeErrorsNameTheLine) {
  EXPECT_EQ(error_of([] { r("ok\n{{ missing.attr }}"); }), "chat template line 2: 'missing' is undefined");
  EXPECT_EQ(error_of([] { r("\n\n{{ raise_exception('roles must alternate') }}"); }),
            "chat template line 3: roles must alternate");
  EXPECT_EQ(error_of([] { r("{{ 1 }}\n{{ 'a' + 1 }}"); }), "chat template line 2: can only concatenate str (not \"int\") to str");
  EXPECT_EQ(error_of([] { r("{{ [1].append(2) }}"); }),
            "chat template line 1: access to attribute 'append' of 'list' object is unsafe.");
  EXPECT_EQ(error_of([] { r("{{ x | no_such_filter }}", {{"x", 1}}); }), "chat template line 1: no filter named 'no_such_filter'");
  EXPECT_EQ(error_of([] { r("{{ 10 ** 30 }}"); }),
            "chat template line 1: integer result out of the 64-bit range (dsa's templates use 64-bit integers)");
  // Integer conversions of floats that have no 64-bit integer (a fuzz finding: a cast out of range).
  EXPECT_EQ(error_of([] { r("{{ '%x' % 141591e400 }}"); }), "chat template line 1: cannot convert float infinity to integer");
  EXPECT_EQ(error_of([] { r("{{ '%d' % -1e400 }}"); }), "chat template line 1: cannot convert float infinity to integer");
  EXPECT_EQ(error_of([] { r("{{ '%d' % 1e30 }}"); }),
            "chat template line 1: %d format: 1e+30 is outside the 64-bit integer range");
  EXPECT_EQ(r("{{ '%d' % -3.9 }}"), "-3");  // truncated toward zero, as Python
}

TEST(Jinja, RenderingIsBounded) {
  // Nested loops of 10^10 iterations stop at the step limit instead of running for hours.
  RenderLimits small;
  small.max_steps = 100000;
  Template t("{% for i in range(100000) %}{% for j in range(100000) %}x{% endfor %}{% endfor %}");
  EXPECT_NE(error_of([&] { t.render(ojson::object(), small); }).find("ran more than 100000 steps"), std::string::npos);
  RenderLimits tiny_out;
  tiny_out.max_output_bytes = 1000;
  EXPECT_NE(error_of([&] { Template("{% for i in range(100) %}{{ 'x' * 100 }}{% endfor %}").render(ojson::object(), tiny_out); })
                .find("output is larger than 1000 bytes"),
            std::string::npos);
  EXPECT_NE(error_of([] { r("{% macro m(n) %}{{ m(n + 1) }}{% endmacro %}{{ m(0) }}"); }).find("macro calls nested deeper"),
            std::string::npos);
  EXPECT_NE(error_of([] { r("{{ " + std::string(5000, '(') + "1" + std::string(5000, ')') + " }}"); }).find("nested too deeply"),
            std::string::npos);
  EXPECT_NE(error_of([] { r("{{ " + std::string(5000, '[') + std::string(5000, ']') + " }}"); }).find("nested too deeply"),
            std::string::npos);
  std::string ifs;
  for (int i = 0; i < 400; ++i) ifs += "{% if 1 %}";
  EXPECT_NE(error_of([&] { r(ifs); }).find("nested too deeply"), std::string::npos);
  // Flat chains parse in loops but build deep trees: bounded as well (evaluation and
  // destruction recurse over them).
  std::string sum = "{{ 1";
  for (int i = 0; i < 5000; ++i) sum += " + 1";
  EXPECT_NE(error_of([&] { r(sum + " }}"); }).find("expression nested too deeply"), std::string::npos);
  std::string filters = "{{ 'a'";
  for (int i = 0; i < 5000; ++i) filters += " | upper";
  EXPECT_NE(error_of([&] { r(filters + " }}"); }).find("expression nested too deeply"), std::string::npos);
  EXPECT_EQ(r("{{ 1" + std::string(" + 1") + std::string(" + 1") + " }}"), "3");
}

TEST(Jinja, OneTemplateRendersFromManyThreads) {
  const Template t("{% set ns = namespace(n=0) %}{% for m in messages %}{% set ns.n = ns.n + m | length %}{{ m | upper }}{% endfor %}={{ ns.n }}");
  std::vector<std::string> got(8);
  std::vector<std::thread> th;
  for (int k = 0; k < 8; ++k)
    th.emplace_back([&, k] {
      ojson ctx = {{"messages", {"ab", "cde", std::string(static_cast<size_t>(k), 'z')}}};
      for (int i = 0; i < 200; ++i) got[static_cast<size_t>(k)] = t.render(ctx);
    });
  for (auto& x : th) x.join();
  for (int k = 0; k < 8; ++k)
    EXPECT_EQ(got[static_cast<size_t>(k)], "ABCDE" + std::string(static_cast<size_t>(k), 'Z') + "=" + std::to_string(5 + k));
}

// Random templates from template-ish fragments (and raw bytes): rendering either succeeds or
// throws TemplateError; nothing else escapes (no crash, no other exception type).
TEST(Jinja, RandomInputOnlyRaisesTemplateErrors) {
  test::Rng rng;
  static const char* frags[] = {"{{", "}}", "{%", "%}", "{#", "#}", "-", "+", " if ", " for ", " in ", " endif ", " endfor ",
                                " set ", "=", " x ", " messages ", "[", "]", "(", ")", "{", "}", ",", ".", "|", " upper ",
                                " is ", " not ", " defined ", "'s'", "\"t\"", "1", "2.5", " macro ", " endmacro ", " loop ",
                                "~", "*", "**", "//", "%", " else ", " elif ", " raw ", " endraw ", "\n", " ", "\\", "é",
                                " namespace(", " range(", " tojson ", " items() ", ":", " recursive ", " break "};
  const ojson ctx = {{"messages", {{{"role", "user"}, {"content", "hi"}}}}, {"x", {1, 2, 3}}};
  int ok = 0, errors = 0;
  for (int i = 0; i < 3000; ++i) {
    std::string t;
    const int n = static_cast<int>(rng.randint(1, 30));
    for (int k = 0; k < n; ++k) {
      if (rng.randint(0, 20) == 0) t += static_cast<char>(rng.randint(0, 255));
      else t += frags[rng.randint(0, static_cast<int64_t>(std::size(frags)) - 1)];
    }
    try {
      RenderLimits lim;
      lim.max_steps = 100000;
      Template(t).render(ctx, lim);
      ++ok;
    } catch (const TemplateError&) {
      ++errors;
    } catch (const std::exception& e) {
      ADD_FAILURE() << "template " << ::testing::PrintToString(t) << " threw a non-TemplateError: " << e.what();
    }
  }
  EXPECT_GT(errors, 0);
  EXPECT_GT(ok, 0);
}

}  // namespace
}  // namespace dsa::jinja
