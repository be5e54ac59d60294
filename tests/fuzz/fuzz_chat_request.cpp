// Fuzz target: the /v1/chat/completions request body (server::parse_chat_request) against both
// prompt formats (DeepSeek-V4's encoder, the GLM-5 Jinja template), the prompt each renders,
// and that prompt (markup and every message's text) through the reply parser of the format
// (with the request's tools), fed in two pieces.
#include <string>
#include <vector>

#include "dsa/chat/output_parser.h"
#include "dsa/chat/prompt_format.h"
#include "dsa/core/error.h"
#include "dsa/server/chat_protocol.h"
#include "fuzz_target.h"

DSA_FUZZ_TARGET(chat_request) {
  using namespace dsa;
  static const std::unique_ptr<chat::PromptFormat> formats[] = {
      chat::make_deepseek_v4_format(),
      chat::make_jinja_format(chat::builtin_glm5_template(), "glm5", chat::OutputSyntax::Glm, "", "<|endoftext|>")};
  const std::string body(reinterpret_cast<const char*>(data), size);
  for (const auto& format : formats) {
    try {
      const server::ChatRequest r = server::parse_chat_request(body, *format);
      const std::string prompt = format->render(r.conv.prompt);
      chat::ParserOptions po;
      po.syntax = format->syntax();
      po.starts_in_reasoning = chat::prompt_opens_reasoning(prompt);
      po.parse_tool_calls = r.conv.parse_tool_calls;
      po.tools = r.conv.all_tools;
      chat::OutputParser parser(po);
      const size_t half = prompt.size() / 2;
      (void)parser.feed(std::string_view(prompt).substr(0, half));
      (void)parser.feed(std::string_view(prompt).substr(half));
      (void)parser.finish();
      (void)server::chat_choice_json(0, parser, "stop").dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    } catch (const server::BadRequest&) {
    } catch (const Error&) {
    }
  }
  return 0;
}
