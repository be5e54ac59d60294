// Output parsers on hand-written model replies, well-formed and broken (missing </think>, cut
// off at max_tokens inside reasoning, a tag, a value or a call; stray tags; text after the end
// of the turn). Every reply is also fed in random pieces: the deltas must add up to the
// one-piece result, never carry a delimiter or part of one, and stream each call's arguments as
// a prefix of the final (valid JSON) arguments. Round trips: calls rendered into a prompt by the
// formats' own encoders parse back to the same calls.
#include <gtest/gtest.h>

#include "common/testing.h"
#include "dsa/chat/deepseek_v4_format.h"
#include "dsa/chat/jinja/py_text.h"
#include "dsa/chat/output_parser.h"
#include "dsa/chat/prompt_format.h"

namespace dsa::chat {
namespace {

using ojson = nlohmann::ordered_json;

const ojson kTools = ojson::parse(R"([
  {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {
     "city": {"type": "string"}, "days": {"type": "integer"}, "opts": {"type": "object"}}}}},
  {"type": "function", "function": {"name": "note", "parameters": {"type": "object", "properties": {"text": {"type": "string"}}}}}
])");

struct Result {
  std::string reasoning, content;
  bool reasoned = false;
  std::vector<ToolCall> calls;
};

ParserOptions opts(OutputSyntax s, bool thinking, bool tools = true) {
  ParserOptions o;
  o.syntax = s;
  o.starts_in_reasoning = thinking;
  o.parse_tool_calls = tools;
  o.tools = kTools;
  return o;
}

// Pieces of whole code points (the server feeds decoded text, never half a character).
std::vector<std::string> split(const std::string& text, test::Rng& rng) {
  const auto cps = jinja::to_code_points(text);
  std::vector<std::string> parts;
  size_t i = 0;
  while (i < cps.size()) {
    const size_t n = std::min<size_t>(cps.size() - i, static_cast<size_t>(rng.randint(1, 7)));
    parts.push_back(jinja::from_code_points(&cps[i], n));
    i += n;
  }
  return parts;
}

void expect_clean(const std::string& piece, const std::string& text) {
  for (const char* bad : {"<think", "</think", "<tool_call", "</tool_call", "<arg_", "</arg_", "｜DSML｜", "<｜end", "<|user",
                          "<|observation", "<|endoftext"})
    EXPECT_EQ(piece.find(bad), std::string::npos) << "delta " << ::testing::PrintToString(piece) << " of reply "
                                                  << ::testing::PrintToString(text) << " leaks " << bad;
}

Result parse(const std::string& text, const ParserOptions& o) {
  OutputParser p(o);
  p.feed(text);
  p.finish();
  Result r{p.reasoning(), p.content(), p.reasoned(), p.tool_calls()};
  // The same reply in random pieces: same result, clean deltas, arguments streamed in order.
  test::Rng rng;
  for (int trial = 0; trial < 20; ++trial) {
    OutputParser q(o);
    std::string reasoning, content;
    std::vector<ToolCall> calls;
    auto take = [&](const ReplyDelta& d) {
      expect_clean(d.reasoning, text);
      expect_clean(d.content, text);
      reasoning += d.reasoning;
      content += d.content;
      for (const ToolCallDelta& t : d.tool_calls) {
        expect_clean(t.arguments, text);
        if (!t.id.empty()) {
          EXPECT_EQ(t.index, static_cast<int>(calls.size()));
          calls.push_back({t.id, t.name, "", false});
        }
        EXPECT_LT(t.index, static_cast<int>(calls.size()));
        if (t.index < static_cast<int>(calls.size())) calls[static_cast<size_t>(t.index)].arguments += t.arguments;
      }
    };
    for (const std::string& piece : split(text, rng)) take(q.feed(piece));
    take(q.finish());
    EXPECT_EQ(reasoning, r.reasoning) << text;
    EXPECT_EQ(content, r.content) << text;
    EXPECT_EQ(calls.size(), r.calls.size()) << text;
    for (size_t i = 0; i < calls.size() && i < r.calls.size(); ++i) {
      EXPECT_EQ(calls[i].name, r.calls[i].name);
      EXPECT_EQ(calls[i].arguments, r.calls[i].arguments);
    }
  }
  for (const ToolCall& c : r.calls) EXPECT_TRUE(ojson::accept(c.arguments)) << c.arguments;
  return r;
}

ojson args(const Result& r, size_t i) { return ojson::parse(r.calls.at(i).arguments); }

// ---- GLM

TEST(GlmOutput, ReasoningAndContent) {
  auto r = parse("Two plus two.</think>The answer is 4.", opts(OutputSyntax::Glm, true));
  EXPECT_EQ(r.reasoning, "Two plus two.");
  EXPECT_EQ(r.content, "The answer is 4.");
  EXPECT_TRUE(r.calls.empty());
  // Chat mode, but the reply opens its own reasoning.
  r = parse("<think>hm</think>ok", opts(OutputSyntax::Glm, false));
  EXPECT_EQ(r.reasoning, "hm");
  EXPECT_EQ(r.content, "ok");
  // Stray tags are dropped, never shown.
  r = parse("a</think>b<think>c", opts(OutputSyntax::Glm, false));
  EXPECT_EQ(r.reasoning, "");
  EXPECT_EQ(r.content, "abc");
}

TEST(GlmOutput, ToolCalls) {
  auto r = parse("Need the weather.</think>Checking.<tool_call>get_weather<arg_key>city</arg_key><arg_value>Paris</arg_value>"
                 "<arg_key>days</arg_key><arg_value>2</arg_value><arg_key>opts</arg_key><arg_value>{\"hourly\": true}</arg_value>"
                 "</tool_call>",
                 opts(OutputSyntax::Glm, true));
  EXPECT_EQ(r.reasoning, "Need the weather.");
  EXPECT_EQ(r.content, "Checking.");
  ASSERT_EQ(r.calls.size(), 1u);
  EXPECT_EQ(r.calls[0].name, "get_weather");
  EXPECT_TRUE(r.calls[0].complete);
  EXPECT_EQ(args(r, 0), ojson::parse(R"({"city": "Paris", "days": 2, "opts": {"hourly": true}})"));
  // GLM-4.5-style newlines between the parts; a string parameter that looks like a number stays
  // a string (the schema says so); unknown parameters: JSON when JSON, else strings.
  r = parse("<tool_call>note\n<arg_key>text</arg_key>\n<arg_value>42</arg_value>\n</tool_call>\n<tool_call>other\n"
            "<arg_key>n</arg_key>\n<arg_value>7</arg_value>\n<arg_key>w</arg_key>\n<arg_value>some words</arg_value>\n</tool_call>",
            opts(OutputSyntax::Glm, false));
  EXPECT_EQ(r.content, "");
  ASSERT_EQ(r.calls.size(), 2u);
  EXPECT_EQ(args(r, 0), ojson::parse(R"({"text": "42"})"));
  EXPECT_EQ(r.calls[1].name, "other");
  EXPECT_EQ(args(r, 1), ojson::parse(R"({"n": 7, "w": "some words"})"));
  // No arguments; quotes, newlines and non-ASCII in a string value.
  r = parse("<tool_call>note</tool_call><tool_call>note<arg_key>text</arg_key><arg_value>say \"hi\"\nnaïve ✓</arg_value></tool_call>",
            opts(OutputSyntax::Glm, false));
  ASSERT_EQ(r.calls.size(), 2u);
  EXPECT_EQ(r.calls[0].arguments, "{}");
  EXPECT_EQ(args(r, 1)["text"], "say \"hi\"\nnaïve ✓");
}

TEST(GlmOutput, BrokenReplies) {
  // No </think>: tool calls end the reasoning; without them everything is reasoning.
  auto r = parse("thinking on<tool_call>note<arg_key>text</arg_key><arg_value>x</arg_value></tool_call>", opts(OutputSyntax::Glm, true));
  EXPECT_EQ(r.reasoning, "thinking on");
  ASSERT_EQ(r.calls.size(), 1u);
  r = parse("still thinking when max_tokens hit", opts(OutputSyntax::Glm, true));
  EXPECT_EQ(r.reasoning, "still thinking when max_tokens hit");
  EXPECT_EQ(r.content, "");
  EXPECT_TRUE(r.reasoned);
  // Cut off inside a string value, a non-string value, a key, and before the name ended.
  r = parse("<tool_call>get_weather<arg_key>city</arg_key><arg_value>Par", opts(OutputSyntax::Glm, false));
  ASSERT_EQ(r.calls.size(), 1u);
  EXPECT_FALSE(r.calls[0].complete);
  EXPECT_EQ(args(r, 0), ojson::parse(R"({"city": "Par"})"));
  r = parse("<tool_call>get_weather<arg_key>days</arg_key><arg_value>1", opts(OutputSyntax::Glm, false));
  EXPECT_EQ(args(r, 0), ojson::parse(R"({"days": 1})"));
  r = parse("<tool_call>get_weather<arg_key>ci", opts(OutputSyntax::Glm, false));
  EXPECT_EQ(r.calls.at(0).arguments, "{}");
  r = parse("ok<tool_call>get_wea", opts(OutputSyntax::Glm, false));
  EXPECT_EQ(r.content, "ok");
  EXPECT_TRUE(r.calls.empty());
  // The end of the turn ends the reply; text after it is not shown.
  r = parse("done<|observation|>junk<tool_call>x</tool_call>", opts(OutputSyntax::Glm, false));
  EXPECT_EQ(r.content, "done");
  EXPECT_TRUE(r.calls.empty());
  // Without tools in the request there are no calls: the tags go, their text stays. Stray tags
  // outside a call go too.
  r = parse("<tool_call>note<arg_key>k</arg_key><arg_value>v</arg_value></tool_call>", opts(OutputSyntax::Glm, false, false));
  EXPECT_EQ(r.content, "notekv");
  EXPECT_TRUE(r.calls.empty());
  r = parse("a</arg_value>b<arg_key>c</tool_call>d", opts(OutputSyntax::Glm, true));
  EXPECT_EQ(r.reasoning, "abcd");
  // A value that is not JSON for a non-string parameter becomes a string.
  r = parse("<tool_call>get_weather<arg_key>days</arg_key><arg_value>two</arg_value></tool_call>", opts(OutputSyntax::Glm, false));
  EXPECT_EQ(args(r, 0), ojson::parse(R"({"days": "two"})"));
  // Text where a tag belongs is skipped.
  r = parse("<tool_call>note junk-free<arg_key>text</arg_key>noise<arg_value>v</arg_value>more noise</tool_call>after",
            opts(OutputSyntax::Glm, false));
  EXPECT_EQ(r.calls.at(0).name, "note junk-free");
  EXPECT_EQ(args(r, 0), ojson::parse(R"({"text": "v"})"));
  EXPECT_EQ(r.content, "after");
}

// ---- DeepSeek-V4

std::string dsml(const std::string& invokes) { return "\n\n<｜DSML｜tool_calls>\n" + invokes + "</｜DSML｜tool_calls>"; }
std::string invoke(const std::string& name, const std::string& params) {
  return "<｜DSML｜invoke name=\"" + name + "\">\n" + params + "</｜DSML｜invoke>\n";
}
std::string param(const std::string& k, bool is_str, const std::string& v) {
  return "<｜DSML｜parameter name=\"" + k + "\" string=\"" + (is_str ? "true" : "false") + "\">" + v + "</｜DSML｜parameter>\n";
}

TEST(DeepseekV4Output, ReasoningContentAndCalls) {
  auto r = parse("Plan.</think>Done.", opts(OutputSyntax::DeepseekV4, true));
  EXPECT_EQ(r.reasoning, "Plan.");
  EXPECT_EQ(r.content, "Done.");
  r = parse("Plan.</think>Let me look." +
                dsml(invoke("get_weather", param("city", true, "Paris") + param("days", false, "2")) +
                     invoke("note", param("text", true, "He said \"hi\"\nline2 é") + param("tags", false, "[\"a\", 1]"))),
            opts(OutputSyntax::DeepseekV4, true));
  EXPECT_EQ(r.reasoning, "Plan.");
  EXPECT_EQ(r.content, "Let me look.");
  ASSERT_EQ(r.calls.size(), 2u);
  EXPECT_EQ(r.calls[0].name, "get_weather");
  EXPECT_EQ(args(r, 0), ojson::parse(R"({"city": "Paris", "days": 2})"));
  EXPECT_EQ(args(r, 1), ojson::parse(R"({"text": "He said \"hi\"\nline2 é", "tags": ["a", 1]})"));
  EXPECT_TRUE(r.calls[1].complete);
  // No parameters.
  r = parse(dsml(invoke("note", "")), opts(OutputSyntax::DeepseekV4, false));
  EXPECT_EQ(r.calls.at(0).arguments, "{}");
  EXPECT_EQ(r.content, "");
}

TEST(DeepseekV4Output, BrokenReplies) {
  // No </think> before the calls.
  auto r = parse("thinking" + dsml(invoke("note", param("text", true, "x"))), opts(OutputSyntax::DeepseekV4, true));
  EXPECT_EQ(r.reasoning, "thinking");
  EXPECT_EQ(r.calls.size(), 1u);
  // string="false" with a value that is not JSON: a string.
  r = parse(dsml(invoke("get_weather", param("days", false, "two days"))), opts(OutputSyntax::DeepseekV4, false));
  EXPECT_EQ(args(r, 0), ojson::parse(R"({"days": "two days"})"));
  // Cut off inside a value, inside a parameter tag, inside the invoke head.
  r = parse("a\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"note\">\n<｜DSML｜parameter name=\"text\" string=\"true\">par",
            opts(OutputSyntax::DeepseekV4, false));
  EXPECT_EQ(r.content, "a");
  EXPECT_EQ(args(r, 0), ojson::parse(R"({"text": "par"})"));
  EXPECT_FALSE(r.calls[0].complete);
  r = parse("\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"note\">\n<｜DSML｜parameter name=\"te", opts(OutputSyntax::DeepseekV4, false));
  EXPECT_EQ(r.calls.at(0).arguments, "{}");
  r = parse("\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"no", opts(OutputSyntax::DeepseekV4, false));
  EXPECT_TRUE(r.calls.empty());
  EXPECT_EQ(r.content, "");
  // End of sentence ends the reply; the blank line before a block is not content.
  r = parse("x\n\n<｜end▁of▁sentence｜>y", opts(OutputSyntax::DeepseekV4, false));
  EXPECT_EQ(r.content, "x\n\n");
  r = parse("text\n\nmore", opts(OutputSyntax::DeepseekV4, false));
  EXPECT_EQ(r.content, "text\n\nmore");
  // Without tools: no calls, the DSML marker goes.
  r = parse(dsml(invoke("note", param("text", true, "x"))), opts(OutputSyntax::DeepseekV4, false, false));
  EXPECT_TRUE(r.calls.empty());
  EXPECT_EQ(r.content, "\n\n<tool_calls>\n<invoke name=\"note\">\n<parameter name=\"text\" string=\"true\">x</parameter>\n</invoke>\n</tool_calls>");
}

// Calls written by the formats' own prompt encoders parse back to the same calls.
TEST(OutputParser, RoundTripsThroughThePromptFormats) {
  const ojson calls = ojson::parse(R"([
    {"id": "a", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"São Paulo\", \"days\": 3, \"opts\": {\"x\": [1, 2.5, null, true]}}"}},
    {"id": "b", "type": "function", "function": {"name": "note", "arguments": "{\"text\": \"<b>bold</b> & \\\"quoted\\\"\\nnew line\"}"}}])");
  ojson user = {{"role", "user"}, {"content", "q"}};
  ojson asst = {{"role", "assistant"}, {"content", "I will check."}, {"reasoning_content", "needs tools"}, {"tool_calls", calls}};
  ojson msgs = ojson::array({user, asst});
  for (OutputSyntax s : {OutputSyntax::DeepseekV4, OutputSyntax::Glm}) {
    std::string prompt, marker;
    if (s == OutputSyntax::DeepseekV4) {
      DeepseekV4Options o;
      o.thinking = true;
      prompt = encode_deepseek_v4(msgs, o);
      marker = "<｜Assistant｜><think>";
    } else {
      ChatPrompt cp;
      cp.messages = msgs;
      cp.tools = kTools;
      cp.thinking = true;
      cp.add_generation_prompt = false;
      prompt = make_jinja_format(builtin_glm5_template(), "b", OutputSyntax::Glm, "", "")->render(cp);
      marker = "<|assistant|><think>";
    }
    const size_t at = prompt.rfind(marker);
    ASSERT_NE(at, std::string::npos) << prompt;
    auto r = parse(prompt.substr(at + marker.size()), opts(s, true));
    EXPECT_EQ(r.reasoning, "needs tools");
    EXPECT_EQ(r.content, "I will check.");
    ASSERT_EQ(r.calls.size(), 2u);
    for (size_t i = 0; i < 2; ++i) {
      EXPECT_EQ(r.calls[i].name, calls[i]["function"]["name"].get<std::string>());
      EXPECT_EQ(args(r, i), ojson::parse(calls[i]["function"]["arguments"].get<std::string>()));
    }
  }
}

TEST(OutputParser, PromptOpensReasoning) {
  EXPECT_TRUE(prompt_opens_reasoning("<|user|>hi<|assistant|><think>"));
  EXPECT_FALSE(prompt_opens_reasoning("<|user|>hi<|assistant|></think>"));
  EXPECT_FALSE(prompt_opens_reasoning("<think>a</think>b<|assistant|>"));
  EXPECT_FALSE(prompt_opens_reasoning("plain"));
}

}  // namespace
}  // namespace dsa::chat
