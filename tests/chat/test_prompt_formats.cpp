// Prompt formats: DeepSeek-V4's native encoder on cases derived from its rules (each expected
// prompt written out by hand from deepseek_v4_format.h's rules), dsa's GLM-5 template on the GLM
// format, the choice of format for a checkpoint directory, and the request fields that shape
// the prompt (chat_request.h).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "common/testing.h"
#include "dsa/chat/chat_request.h"
#include "dsa/chat/deepseek_v4_format.h"
#include "dsa/chat/prompt_format.h"

namespace dsa::chat {
namespace {

using ojson = nlohmann::ordered_json;
using test::error_of;

const std::string BOS = "<｜begin▁of▁sentence｜>", EOS = "<｜end▁of▁sentence｜>", U = "<｜User｜>", A = "<｜Assistant｜>",
                  D = "｜DSML｜";

ojson msg(const char* role, const char* content) { return {{"role", role}, {"content", content}}; }

ojson arr(const std::vector<ojson>& ms) {
  ojson a = ojson::array();
  for (const auto& m : ms) a.push_back(m);
  return a;
}

std::string v4(const std::vector<ojson>& messages, bool thinking, bool drop = true, bool max_effort = false) {
  DeepseekV4Options o;
  o.thinking = thinking;
  o.drop_thinking = drop;
  o.max_effort = max_effort;
  return encode_deepseek_v4(arr(messages), o);
}

TEST(DeepseekV4Format, ChatTurn) {
  EXPECT_EQ(v4({msg("system", "You are helpful."), msg("user", "Hi")}, false), BOS + "You are helpful." + U + "Hi" + A + "</think>");
  EXPECT_EQ(v4({msg("user", "Hi")}, true), BOS + U + "Hi" + A + "<think>");
}

TEST(DeepseekV4Format, EarlierReasoningIsDropped) {
  ojson a = msg("assistant", "2");
  a["reasoning_content"] = "one plus one";
  const std::vector<ojson> ms = {msg("user", "1+1?"), a, msg("user", "times 3?")};
  // Thinking: earlier turns lose their reasoning and were answered in chat form; only the last
  // user turn opens <think>.
  EXPECT_EQ(v4(ms, true), BOS + U + "1+1?" + A + "</think>" + "2" + EOS + U + "times 3?" + A + "<think>");
  // drop_thinking off keeps every turn's reasoning.
  EXPECT_EQ(v4(ms, true, false), BOS + U + "1+1?" + A + "<think>" + "one plus one</think>2" + EOS + U + "times 3?" + A + "<think>");
  // Chat mode never shows reasoning.
  EXPECT_EQ(v4(ms, false), BOS + U + "1+1?" + A + "</think>" + "2" + EOS + U + "times 3?" + A + "</think>");
  // The assistant turn after the last user turn keeps its reasoning (a continued turn).
  EXPECT_EQ(v4({msg("user", "q"), a}, true), BOS + U + "q" + A + "<think>" + "one plus one</think>2" + EOS);
}

TEST(DeepseekV4Format, ToolCallsAndResults) {
  ojson call = msg("assistant", "");
  call["tool_calls"] = {
      {{"id", "c1"}, {"type", "function"}, {"function", {{"name", "get_weather"}, {"arguments", R"({"city": "Paris"})"}}}},
      {{"id", "c2"}, {"type", "function"}, {"function", {{"name", "f"}, {"arguments", R"({"n": 2, "tags": ["a", "é"]})"}}}}};
  ojson r2 = msg("tool", "R2"), r1 = msg("tool", "R1");
  r2["tool_call_id"] = "c2";
  r1["tool_call_id"] = "c1";
  const std::vector<ojson> ms = {msg("user", "weather?"), call, r2, r1, msg("user", "thanks")};
  const std::string calls = "\n\n<" + D + "tool_calls>\n<" + D + "invoke name=\"get_weather\">\n<" + D +
                            "parameter name=\"city\" string=\"true\">Paris</" + D + "parameter>\n</" + D + "invoke>\n<" + D +
                            "invoke name=\"f\">\n<" + D + "parameter name=\"n\" string=\"false\">2</" + D + "parameter>\n<" + D +
                            "parameter name=\"tags\" string=\"false\">[\"a\", \"é\"]</" + D + "parameter>\n</" + D + "invoke>\n</" +
                            D + "tool_calls>";
  // Results become one user turn, in call order, then the user's text joins it.
  EXPECT_EQ(v4(ms, false), BOS + U + "weather?" + A + "</think>" + calls + EOS + U +
                               "<tool_result>R1</tool_result>\n\n<tool_result>R2</tool_result>\n\nthanks" + A + "</think>");
  // Arguments that are not a JSON object become one string parameter named "arguments".
  ojson odd = msg("assistant", "x");
  odd["tool_calls"] = {{{"id", "c"}, {"function", {{"name", "g"}, {"arguments", "not json"}}}}};
  EXPECT_EQ(v4({msg("user", "q"), odd}, false), BOS + U + "q" + A + "</think>x\n\n<" + D + "tool_calls>\n<" + D +
                                                     "invoke name=\"g\">\n<" + D + "parameter name=\"arguments\" string=\"true\">not json</" +
                                                     D + "parameter>\n</" + D + "invoke>\n</" + D + "tool_calls>" + EOS);
}

TEST(DeepseekV4Format, ToolsInTheSystemPartKeepReasoning) {
  ojson sys = msg("system", "S");
  sys["tools"] = ojson::array({ojson{{"type", "function"},
                                     {"function", {{"name", "get_weather"}, {"description", "Weather."}, {"parameters", {{"type", "object"}}}}}}});
  ojson a = msg("assistant", "2");
  a["reasoning_content"] = "r";
  const std::string p = v4({sys, msg("user", "1"), a, msg("user", "2")}, true);
  EXPECT_EQ(p.rfind(BOS + "S\n\n## Tools\n\nYou have access to a set of tools", 0), 0u) << p;
  EXPECT_NE(p.find("### Available Tool Schemas\n\n{\"name\": \"get_weather\", \"description\": \"Weather.\", \"parameters\": "
                   "{\"type\": \"object\"}}\n\nYou MUST strictly follow"),
            std::string::npos)
      << p;
  // With tools, earlier reasoning stays (drop_thinking is forced off).
  EXPECT_NE(p.find(U + "1" + A + "<think>r</think>2" + EOS + U + "2" + A + "<think>"), std::string::npos) << p;
}

TEST(DeepseekV4Format, EffortReminderAndGenerationPrompt) {
  const std::string p = v4({msg("user", "Hi")}, true, true, true);
  EXPECT_EQ(p.rfind(BOS + "Reasoning Effort: Absolute maximum with no shortcuts permitted.\n", 0), 0u);
  EXPECT_NE(p.find("left unchecked.\n\n" + U + "Hi" + A + "<think>"), std::string::npos);
  EXPECT_EQ(v4({msg("user", "Hi")}, false, true, true), BOS + U + "Hi" + A + "</think>");  // only in thinking mode
  // latest_reminder: the assistant marker comes before it.
  EXPECT_EQ(v4({msg("user", "Hi"), msg("latest_reminder", "be brief")}, false),
            BOS + U + "Hi" + A + "</think><｜latest_reminder｜>be brief");
  EXPECT_NE(error_of([] { v4({msg("developer", "x")}, false); }).find("role 'developer' has no place"), std::string::npos);

  auto fmt = make_deepseek_v4_format();
  ChatPrompt cp;
  cp.messages = arr({msg("user", "Hi")});
  cp.add_generation_prompt = false;
  EXPECT_EQ(fmt->render(cp), BOS + U + "Hi");
  cp.add_generation_prompt = true;
  cp.tools = {{{"type", "function"}, {"function", {{"name", "t"}}}}};
  EXPECT_EQ(fmt->render(cp).rfind(BOS + "\n\n## Tools", 0), 0u);  // an empty system part carries the tools
}

std::string glm(const std::vector<ojson>& messages, bool thinking, const ojson& tools = ojson::array()) {
  auto f = make_jinja_format(builtin_glm5_template(), "builtin", OutputSyntax::Glm, "", "");
  ChatPrompt p;
  p.messages = arr(messages);
  p.tools = tools;
  p.thinking = thinking;
  return f->render(p);
}

TEST(Glm5Template, Format) {
  EXPECT_EQ(glm({msg("system", "S"), msg("user", "Hi")}, true), "[gMASK]<sop><|system|>S<|user|>Hi<|assistant|><think>");
  EXPECT_EQ(glm({msg("user", "Hi")}, false), "[gMASK]<sop><|user|>Hi<|assistant|></think>");
  ojson a = msg("assistant", "  answer  ");
  a["reasoning_content"] = " why ";
  // Reasoning shows only after the last user turn.
  EXPECT_EQ(glm({msg("user", "q"), a, msg("user", "q2")}, true),
            "[gMASK]<sop><|user|>q<|assistant|></think>answer<|user|>q2<|assistant|><think>");
  EXPECT_EQ(glm({msg("user", "q"), a}, true), "[gMASK]<sop><|user|>q<|assistant|><think>why</think>answer<|assistant|><think>");
  ojson call = msg("assistant", "");
  call["content"] = nullptr;
  call["tool_calls"] = {{{"id", "c"}, {"type", "function"},
                         {"function", {{"name", "get_weather"}, {"arguments", R"({"city": "Paris", "days": 2})"}}}}};
  ojson res = msg("tool", "sunny");
  const ojson tools = {{{"type", "function"}, {"function", {{"name", "get_weather"}, {"parameters", {{"type", "object"}}}}}}};
  const std::string p = glm({msg("user", "w?"), call, res}, true, tools);
  EXPECT_EQ(p.rfind("[gMASK]<sop><|system|>\n# Tools\n\nYou may call one or more functions", 0), 0u) << p;
  EXPECT_NE(p.find("<tools>\n{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"parameters\": {\"type\": "
                   "\"object\"}}}\n</tools>"),
            std::string::npos)
      << p;
  EXPECT_NE(p.find("<|user|>w?<|assistant|></think><tool_call>get_weather<arg_key>city</arg_key><arg_value>Paris</arg_value>"
                   "<arg_key>days</arg_key><arg_value>2</arg_value></tool_call><|observation|><tool_response>sunny"
                   "</tool_response><|assistant|><think>"),
            std::string::npos)
      << p;
}

struct TempDir {
  TempDir() : path(std::filesystem::temp_directory_path() / ("dsa_chat_fmt_" + std::to_string(test::test_seed()))) {
    std::filesystem::create_directories(path);
  }
  ~TempDir() { std::filesystem::remove_all(path); }
  void write(const std::string& name, const std::string& text) const { std::ofstream(path / name) << text; }
  std::filesystem::path path;
};

TEST(PromptFormat, ChosenForTheCheckpoint) {
  TempDir d;
  EXPECT_EQ(load_prompt_format(d.path.string(), "deepseek_v4")->name(), "deepseek_v4 (native encoder)");
  EXPECT_EQ(load_prompt_format(d.path.string(), "glm_moe_dsa")->name(), "jinja (dsa's built-in GLM-5 template)");
  d.write("tokenizer_config.json", R"({"bos_token": {"content": "<B>"}, "eos_token": "<E>", "chat_template": "{{ bos_token }}{{ messages[0].content }}{{ eos_token }}"})");
  auto f = load_prompt_format(d.path.string(), "glm_moe_dsa");
  ChatPrompt p;
  p.messages = arr({msg("user", "x")});
  EXPECT_EQ(f->render(p), "<B>x<E>");
  d.write("chat_template.jinja", "T:{{ messages | length }}");
  EXPECT_EQ(load_prompt_format(d.path.string(), "glm_moe_dsa")->render(p), "T:1");
  d.write("other.jinja", "O\n{{ enable_thinking }}");
  auto o = load_prompt_format(d.path.string(), "deepseek_v4", (d.path / "other.jinja").string());
  EXPECT_EQ(o->syntax(), OutputSyntax::DeepseekV4);
  EXPECT_EQ(o->render(p), "O\nFalse");
  d.write("broken.jinja", "ok\n{% if %}");
  const std::string e = error_of([&] { load_prompt_format(d.path.string(), "glm_moe_dsa", (d.path / "broken.jinja").string()); });
  EXPECT_NE(e.find("broken.jinja: chat template line 2"), std::string::npos) << e;
}

ChatRequestParts req(const std::string& body, const PromptFormat& f) { return parse_chat_request(ojson::parse(body), f); }

TEST(ChatRequest, ThinkingToolChoiceAndErrors) {
  auto g = make_jinja_format(builtin_glm5_template(), "b", OutputSyntax::Glm, "", "");
  auto v = make_deepseek_v4_format();
  const std::string m = R"("messages": [{"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}])";
  EXPECT_TRUE(req("{" + m + "}", *g).prompt.thinking);   // GLM-5 thinks by default
  EXPECT_FALSE(req("{" + m + "}", *v).prompt.thinking);  // DeepSeek-V4 chats by default
  EXPECT_EQ(req("{" + m + "}", *g).prompt.messages[0]["content"], "a\nb");
  EXPECT_FALSE(req("{" + m + R"(, "chat_template_kwargs": {"enable_thinking": false}})", *g).prompt.thinking);
  EXPECT_TRUE(req("{" + m + R"(, "chat_template_kwargs": {"thinking": true}})", *v).prompt.thinking);
  EXPECT_TRUE(req("{" + m + R"(, "reasoning_effort": "high"})", *v).prompt.thinking);
  EXPECT_FALSE(req("{" + m + R"(, "reasoning_effort": "none"})", *g).prompt.thinking);
  EXPECT_FALSE(req("{" + m + R"(, "thinking": {"type": "disabled"}})", *g).prompt.thinking);

  const std::string tools = R"("tools": [{"type": "function", "function": {"name": "a"}}, {"type": "function", "function": {"name": "b"}}])";
  auto r = req("{" + m + "," + tools + "}", *g);
  EXPECT_TRUE(r.parse_tool_calls);
  EXPECT_EQ(r.prompt.tools.size(), 2u);
  r = req("{" + m + "," + tools + R"(, "tool_choice": "none"})", *g);
  EXPECT_FALSE(r.parse_tool_calls);
  EXPECT_TRUE(r.prompt.tools.empty());
  r = req("{" + m + "," + tools + R"(, "tool_choice": {"type": "function", "function": {"name": "b"}}})", *g);
  ASSERT_EQ(r.prompt.tools.size(), 1u);
  EXPECT_EQ(r.prompt.tools[0]["function"]["name"], "b");

  auto param_of = [&](const std::string& body) {
    try {
      req(body, *g);
    } catch (const RequestError& e) {
      return e.param;
    }
    return std::string("(accepted)");
  };
  EXPECT_EQ(param_of("{" + m + R"(, "response_format": {"type": "json_schema", "json_schema": {}}})"), "response_format");
  EXPECT_EQ(param_of("{" + m + "," + tools + R"(, "tool_choice": {"type": "function", "function": {"name": "zz"}}})"), "tool_choice");
  EXPECT_EQ(param_of(R"({"messages": [{"role": "robot", "content": "x"}]})"), "messages[0].role");
  EXPECT_EQ(param_of(R"({"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {}}]}]})"),
            "messages[0].content[0]");
  EXPECT_EQ(param_of(R"({"messages": []})"), "messages");
  EXPECT_EQ(param_of("{" + m + R"(, "functions": []})"), "functions");
  EXPECT_EQ(param_of("{" + m + R"(, "reasoning_effort": "extreme"})"), "reasoning_effort");
  EXPECT_EQ(param_of(R"({"messages": [{"role": "assistant", "content": null, "tool_calls": [{"function": {"name": 3}}]}]})"),
            "messages[0].tool_calls[0]");
  // A "type" of the wrong JSON type is the client's error, named (it once escaped as json's type_error).
  EXPECT_EQ(param_of("{" + m + R"(, "tools": [{"type": 2147483648, "function": {"name": "a"}}]})"), "tools[0].type");
  EXPECT_EQ(param_of("{" + m + R"(, "response_format": {"type": []}})"), "response_format.type");
  EXPECT_EQ(param_of("{" + m + "," + tools + R"(, "tool_choice": {"type": 1, "function": {"name": "a"}}})"), "tool_choice.type");
  EXPECT_EQ(param_of("{" + m + R"(, "thinking": {"type": false}})"), "thinking.type");
  EXPECT_EQ(param_of("{" + m + "}"), "(accepted)");
}

}  // namespace
}  // namespace dsa::chat
