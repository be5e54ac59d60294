// PromptFormat: how a model family turns a conversation into prompt text, and which output
// syntax its replies use (output_parser.h).
//  - GLM-5 / GLM-5.1: a Jinja chat template (the checkpoint's chat_template.jinja, or
//    chat_template in tokenizer_config.json; else dsa's built-in GLM-5 template), rendered by
//    dsa's Jinja engine (jinja/jinja.h) with the context Hugging Face gives templates:
//    messages (tool-call arguments as objects), tools, add_generation_prompt, bos/eos tokens,
//    enable_thinking / thinking, reasoning_effort and the request's chat_template_kwargs.
//  - DeepSeek-V4: no template; the checkpoint's Python prompt encoder is re-implemented
//    natively (deepseek_v4_format.h).
// `--chat-template FILE` replaces the checkpoint's template; any model type can be given one.
#pragma once
#include <memory>
#include <optional>
#include <string>

#include "dsa/chat/chat_prompt.h"

namespace dsa::chat {

enum class OutputSyntax { Glm, DeepseekV4 };

class PromptFormat {
 public:
  virtual ~PromptFormat() = default;
  virtual std::string name() const = 0;  // for logs: "jinja (chat_template.jinja)", "deepseek_v4"
  // The prompt text (special tokens spelled out; encode it without adding BOS again). Throws
  // dsa::Error when the conversation cannot be rendered (a template's raise_exception, an
  // unsupported role): the server answers 400 with the message.
  virtual std::string render(const ChatPrompt& p) const = 0;
  virtual OutputSyntax syntax() const = 0;
  virtual bool default_thinking() const = 0;  // when the request does not say
};

// A Jinja template (template text as given) for a model whose replies use `syntax`.
std::unique_ptr<PromptFormat> make_jinja_format(const std::string& template_text, const std::string& label,
                                                OutputSyntax syntax, std::string bos_token, std::string eos_token);
std::unique_ptr<PromptFormat> make_deepseek_v4_format();

// dsa's own GLM-5 template: the GLM-5 prompt format (used when a GLM checkpoint ships none, and
// written into tiny GLM checkpoints).
const std::string& builtin_glm5_template();

// The format of a checkpoint directory: `chat_template_file` when given; else by model_type
// (config.json): deepseek_v4 -> the native encoder; glm_moe_dsa -> chat_template.jinja, then
// tokenizer_config.json's chat_template, then the built-in GLM-5 template. bos/eos tokens come
// from tokenizer_config.json. Throws dsa::Error naming the file on a broken template.
std::unique_ptr<PromptFormat> load_prompt_format(const std::string& model_dir, const std::string& model_type,
                                                 const std::string& chat_template_file = "");

}  // namespace dsa::chat
