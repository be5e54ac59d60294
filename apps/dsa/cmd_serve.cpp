// `dsa serve --model DIR [--host 127.0.0.1] [--port 8000] [--device cpu|cuda[:i]]`: the
// OpenAI-compatible HTTP server (src/dsa/server/server.h) over the continuous-batching engine
// (src/dsa/engine/engine.h). Prompts are token ids, or strings when the checkpoint has a
// tokenizer.json (src/dsa/tokenizer: encoded with the special tokens its post-processor adds,
// e.g. BOS, as vLLM does for completions; responses decoded without special tokens); --tokenizer
// PATH picks another, --no-tokenizer serves ids only. The eos ids come from the checkpoint's
// generation_config.json, else config.json (eos_token_id: an id or a list), plus the
// tokenizer's eos token. With a tokenizer, /v1/chat/completions renders conversations with the
// model's prompt format (chat/prompt_format.h: DeepSeek-V4's encoder, GLM-5's chat template;
// --chat-template FILE replaces it). On CUDA the kernels are tuned for the engine limits (max_step_tokens, max_running)
// before the weights load, as `dsa generate` does (tune/model_warmup.h; --no-tune: cached
// tactics only). Built only with cpp-httplib (DSA_WITH_SERVER); otherwise the command says so.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "cli_args.h"
#include "commands.h"
#include "dsa/core/error.h"
#include "dsa/core/log.h"
#include "dsa/core/device.h"
#include "dsa/core/tensor.h"
#include "dsa/model/config.h"
#include "dsa/tune/bucket.h"
#include "dsa/tune/model_warmup.h"
#include "dsa/tokenizer/tokenizer.h"
#ifdef DSA_WITH_SERVER
#include "dsa/engine/engine.h"
#include "dsa/model/causal_lm.h"
#include "dsa/server/server.h"
#endif
#include "dsa/chat/prompt_format.h"
#include "reply_decoder.h"

namespace dsa::cli {
namespace {

struct Args {
  std::string model, host = "127.0.0.1", device = "cpu", name;
  int port = 8000, max_running = 16, threads = 64;
  int64_t max_step_tokens = 512, max_prefill_chunk = 0, max_model_len = 0;
  bool tune = true;
  double tune_seconds = 60;
  std::string tokenizer;  // "" = the model dir's tokenizer.json when present
  bool use_tokenizer = true;
  std::string chat_template;  // "" = the checkpoint's format
};

// eos_token_id of generation_config.json (preferred) or config.json: an id or a list of ids.
std::vector<int32_t> eos_ids(const std::string& dir) {
  for (const char* file : {"generation_config.json", "config.json"}) {
    const auto path = std::filesystem::path(dir) / file;
    if (!std::filesystem::exists(path)) continue;
    const nlohmann::json j = nlohmann::json::parse(std::ifstream(path), nullptr, false);
    if (j.is_discarded() || !j.contains("eos_token_id")) continue;
    const nlohmann::json& e = j["eos_token_id"];
    std::vector<int32_t> ids;
    if (e.is_number_integer()) ids.push_back(e.get<int32_t>());
    if (e.is_array())
      for (const auto& x : e)
        if (x.is_number_integer()) ids.push_back(x.get<int32_t>());
    return ids;
  }
  return {};
}

void run(const Args& a) {
#ifdef DSA_WITH_SERVER
  const Device dev = parse_device(a.device);
  DSA_CHECK(a.tune_seconds >= 0, "--tune-seconds must be >= 0, got {}", a.tune_seconds);
  if (dev.is_cuda() && dev.index >= 0 && dev.index < static_cast<int>(cuda_devices().size())) {
    tune::ModelWarmupOptions o;
    o.tune = a.tune;
    o.max_seconds = a.tune_seconds;
    const tune::EngineLimits limits{tune::next_pow2(a.max_step_tokens), a.max_running};
    tune::warm_up_for_model(tune::plan_model_from_config(model::load_model_config(a.model)), dev.index, limits, o);
  }
  // The tokenizer first: a broken one is reported before the weights load.
  std::shared_ptr<Tokenizer> tok;
  const std::string tok_path = a.tokenizer.empty() ? a.model : a.tokenizer;
  const bool have_file = !a.tokenizer.empty() || std::filesystem::exists(std::filesystem::path(a.model) / "tokenizer.json");
  if (a.use_tokenizer && have_file) {
    tok = Tokenizer::load(tok_path);
    log_info("tokenizer {}: {} ids", tok_path, tok->vocab_size());
  } else {
    log_info("no tokenizer: prompts are token ids, responses carry token_ids and empty text");
  }
  std::shared_ptr<const chat::PromptFormat> format;  // before the weights: a broken template fails fast
  if (tok) format = chat::load_prompt_format(a.model, std::string(model::arch_name(model::load_model_config(a.model).arch)),
                                             a.chat_template);
  auto lm = model::load_causal_lm(a.model, dev);
  if (tok && tok->vocab_size() > lm->config().vocab_size)
    log_warn("the tokenizer has {} ids, the model's vocabulary {}: prompts using the ids above are refused (400)",
             tok->vocab_size(), lm->config().vocab_size);
  engine::EngineOptions eo;
  eo.max_running = a.max_running;
  eo.max_step_tokens = a.max_step_tokens;
  eo.max_prefill_chunk = a.max_prefill_chunk;
  eo.max_model_len = a.max_model_len;
  eo.eos_token_ids = eos_ids(a.model);
  if (tok && tok->eos_id() && std::find(eo.eos_token_ids.begin(), eo.eos_token_ids.end(), *tok->eos_id()) ==
                                  eo.eos_token_ids.end())
    eo.eos_token_ids.push_back(*tok->eos_id());
  engine::Engine eng(*lm, eo);
  server::ServerOptions so;
  so.host = a.host;
  so.port = a.port;
  so.threads = a.threads;
  so.model_name = a.name.empty() ? std::filesystem::path(a.model).filename().string() : a.name;
  if (so.model_name.empty()) so.model_name = "dsa";
  if (tok) {
    so.encode = [tok](const std::string& text) { return tok->encode(text, /*add_special_tokens=*/true); };
    so.decode = [tok](const std::vector<int32_t>& ids) { return tok->decode(ids, /*skip_special_tokens=*/true); };
    auto chat = std::make_shared<server::ChatServing>();
    chat->format = format;
    chat->encode = [tok](const std::string& text) { return tok->encode(text, /*add_special_tokens=*/false); };
    chat->decode = reply_decoder(tok, format->syntax());
    log_info("chat: {}", chat->format->name());
    so.chat = std::move(chat);
  }
  server::Server srv(eng, so);
  const int port = srv.bind();
  log_info("serving {} on http://{}:{} ({}; max_running {}, max_step_tokens {}, context {})", so.model_name, a.host,
           port, lm->device().str(), eo.max_running, eo.max_step_tokens, eng.max_model_len());
  srv.listen();
#else
  (void)a;
  fail("dsa serve: this build has no HTTP server (configured without cpp-httplib or with DSA_SERVER=OFF: install "
       "libcpp-httplib-dev and reconfigure)");
#endif
}

const bool registered = add_command([](CLI::App& app) {
  auto* cmd = app.add_subcommand("serve", "OpenAI-compatible HTTP server (/v1/completions, /v1/chat/completions with a tokenizer)");
  auto a = std::make_shared<Args>();
  cmd->add_option("--model", a->model, "Checkpoint directory (config.json + safetensors)")->required();
  cmd->add_option("--host", a->host, "Address to listen on")->capture_default_str();
  cmd->add_option("--port", a->port, "Port (0: any free port)")->capture_default_str();
  cmd->add_option("--device", a->device, "cpu (default), cuda or cuda:N");
  cmd->add_option("--served-model-name", a->name, "Model id in /v1/models and responses (default: the dir name)");
  cmd->add_option("--max-running", a->max_running, "Requests running at once")->capture_default_str();
  cmd->add_option("--max-step-tokens", a->max_step_tokens, "Tokens of one forward")->capture_default_str();
  cmd->add_option("--max-prefill-chunk", a->max_prefill_chunk, "Prompt tokens of one request per step (0: no cap)")
      ->capture_default_str();
  cmd->add_option("--max-model-len", a->max_model_len, "Prompt + max_tokens bound (0: the model's context)")
      ->capture_default_str();
  cmd->add_option("--threads", a->threads, "HTTP worker threads (each open stream holds one)")->capture_default_str();
  cmd->add_option("--tokenizer", a->tokenizer, "tokenizer.json (or its directory); default: the model dir's");
  cmd->add_flag("!--no-tokenizer", a->use_tokenizer, "Serve token-id prompts only (no tokenizer)");
  cmd->add_option("--chat-template", a->chat_template,
                  "A Jinja chat template for /v1/chat/completions instead of the checkpoint's format");
  cmd->add_flag("--tune,!--no-tune", a->tune,
                "CUDA: tune kernel tactics missing from the tuning cache for these engine limits first (default on)");
  cmd->add_option("--tune-seconds", a->tune_seconds, "CUDA: time bound of tuning and warm-up")->capture_default_str();
  cmd->callback([a] { run(*a); });
});

}  // namespace
}  // namespace dsa::cli
