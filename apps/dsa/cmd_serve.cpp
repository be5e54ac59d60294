// `dsa serve DIR [--host 127.0.0.1] [--port 8000] [--device cpu|cuda[:N]] ...` (or --model DIR):
// the OpenAI-compatible HTTP server (src/dsa/server/server.h) over the continuous-batching engine
// (src/dsa/engine/engine.h). Prompts are token ids, or strings when the checkpoint has a
// tokenizer.json (src/dsa/tokenizer: encoded with the special tokens its post-processor adds,
// e.g. BOS, as vLLM does for completions, unless the request says add_special_tokens: false;
// responses decoded without special tokens); --tokenizer PATH picks another, --no-tokenizer
// serves ids only. The eos ids come from the checkpoint's generation_config.json, else
// config.json (eos_token_id: an id or a list), plus the tokenizer's eos token. Engine limits
// carry vLLM's names (--max-num-seqs, --max-num-batched-tokens, --max-model-len; the old
// --max-running / --max-step-tokens still work). With a tokenizer, /v1/chat/completions renders
// conversations with the model's prompt format (chat/prompt_format.h: DeepSeek-V4's encoder,
// GLM-5's chat template; --chat-template FILE replaces it). On CUDA the kernels are tuned for those limits
// before the weights load, as `dsa generate` does (tune/model_warmup.h; --no-tune: cached
// tactics only). SIGTERM / SIGINT drain: no new connections or requests, requests in progress
// get --shutdown-timeout seconds, then the rest are aborted (open streams end with a final
// chunk) and the command exits 0; a second signal aborts at once. Built only with cpp-httplib
// (DSA_WITH_SERVER); otherwise the command says so. --tensor-parallel-size N shards a GLM-5.1
// or DeepSeek-V4 model over N ranks of this process (docs/parallelism.md).
#include <pthread.h>
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <sstream>
#include <thread>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "cli_args.h"
#include "commands.h"
#include "dsa/core/error.h"
#include "dsa/core/log.h"
#include "dsa/core/regular_file.h"
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
#include "model_load.h"  // LoadFormatArgs: the options exist in every build (serve then fails clearly)
#include "reply_decoder.h"

namespace dsa::cli {
namespace {

struct Args {
  std::string model, model_pos, host = "127.0.0.1", device = "cpu", name;
  int port = 8000, max_running = 16, threads = 1024;
  int speculative_tokens = 0;  // MTP drafts per step (docs/speculative-decoding.md)
  std::string speculative_acceptance = "rejection";  // how sampled drafts are verified
  int tensor_parallel = 1;     // ranks (docs/parallelism.md)
  DistArgs dist;               // --nnodes: one rank per process
  int64_t max_step_tokens = 512, max_prefill_chunk = 0, max_model_len = 0;
  bool tune = true, enforce_eager = false;
  int64_t max_graph_batch = 0;
  double tune_seconds = 60;
  std::string tokenizer;  // "" = the model dir's tokenizer.json when present
  bool use_tokenizer = true;
  double gpu_memory_utilization = 0.9;
  size_t kv_cache_memory = 0;
  std::string api_key, allowed_origins, log_level;
  int64_t max_queue = 2048;
  size_t max_request_bytes = 4u << 20;
  double header_timeout = 10, idle_timeout = 15, read_timeout = 30, shutdown_timeout = 30;
  std::string chat_template;  // "" = the checkpoint's format
  LoadFormatArgs load;        // --load-format, --layers
};

std::vector<std::string> split_list(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string item; std::getline(ss, item, ',');) {
    while (!item.empty() && item.front() == ' ') item.erase(item.begin());
    while (!item.empty() && item.back() == ' ') item.pop_back();
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

// eos_token_id of generation_config.json (preferred) or config.json: an id or a list of ids.
std::vector<int32_t> eos_ids(const std::string& dir) {
  for (const char* file : {"generation_config.json", "config.json"}) {
    const std::string path = (std::filesystem::path(dir) / file).string();
    if (path_kind(path) == PathKind::Missing) continue;
    const nlohmann::json j = nlohmann::json::parse(read_regular_file(path, kMaxConfigFileBytes), nullptr, false);
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

#ifdef DSA_WITH_SERVER
// SIGTERM / SIGINT, taken by one thread (blocked in every other: the mask is inherited, so this
// must exist before other threads start). Before the server is up a signal ends the process at
// once (a long load or tuning can be interrupted); while it serves, the first drains
// (Server::shutdown with the drain time) and a second aborts what still runs.
class DrainSignals {
 public:
  DrainSignals() {
    sigemptyset(&set_);
    sigaddset(&set_, SIGTERM);
    sigaddset(&set_, SIGINT);
    sigaddset(&set_, SIGUSR1);  // internal: ends the thread
    pthread_sigmask(SIG_BLOCK, &set_, nullptr);
    thread_ = std::thread([this] { loop(); });
  }
  ~DrainSignals() {
    unserve();
    done_ = true;
    pthread_kill(thread_.native_handle(), SIGUSR1);
    thread_.join();
  }
  void serve(server::Server* s, std::chrono::milliseconds drain) {
    std::lock_guard lk(mu_);
    srv_ = s;
    drain_ = drain;
  }
  // After this no signal touches the server (the shutdowns it started have returned).
  void unserve() {
    std::vector<std::thread> running;
    {
      std::lock_guard lk(mu_);
      srv_ = nullptr;
      running.swap(shutdowns_);
    }
    for (auto& t : running) t.join();
  }

 private:
  void loop() {
    for (int n = 0;;) {
      int sig = 0;
      if (sigwait(&set_, &sig) != 0) continue;
      if (sig == SIGUSR1 && done_) return;
      if (sig == SIGUSR1) continue;
      std::lock_guard lk(mu_);
      if (!srv_) {
        log_info("{}: stopping", strsignal(sig));
        std::_Exit(128 + sig);
      }
      const auto drain = n++ == 0 ? drain_ : std::chrono::milliseconds(0);
      if (drain.count() > 0)
        log_info("{}: stopping (requests in progress get {:.1f} s; a second signal aborts them)", strsignal(sig),
                 drain.count() / 1000.0);
      else
        log_info("{}: stopping: aborting the requests in progress", strsignal(sig));
      shutdowns_.emplace_back([s = srv_, drain] { s->shutdown(drain); });
    }
  }

  sigset_t set_;
  std::atomic<bool> done_{false};
  std::mutex mu_;
  server::Server* srv_ = nullptr;
  std::chrono::milliseconds drain_{0};
  std::vector<std::thread> shutdowns_;
  std::thread thread_;
};
#endif

void run(const Args& args) {
#ifdef DSA_WITH_SERVER
  Args a = args;
  DSA_CHECK(!a.model.empty() || !a.model_pos.empty(), "dsa serve: give the checkpoint directory (dsa serve DIR)");
  DSA_CHECK(a.model.empty() || a.model_pos.empty() || a.model == a.model_pos,
            "dsa serve: two checkpoints given ({} and --model {})", a.model_pos, a.model);
  if (a.model.empty()) a.model = a.model_pos;
  if (!a.log_level.empty()) {
    const auto lvl = parse_log_level(a.log_level);
    DSA_CHECK(lvl.has_value(), "--log-level: '{}' (expected debug, info, warn or error)", a.log_level);
    set_log_level(*lvl);
  }
  DSA_CHECK(a.shutdown_timeout >= 0, "--shutdown-timeout must be >= 0, got {}", a.shutdown_timeout);
  DrainSignals signals;  // before any other thread exists (engine loop, HTTP workers, tuning)
  const Device dev = parse_device(a.device);
  DSA_CHECK(a.tune_seconds >= 0, "--tune-seconds must be >= 0, got {}", a.tune_seconds);
  const engine::SpecAcceptance acceptance = engine::parse_spec_acceptance(a.speculative_acceptance);  // before loading
  const model::WeightSource source = a.load.source();
  const model::ModelConfig config = model::model_config_for_load(a.model, source.format, source.layers);
  if (dev.is_cuda() && dev.index >= 0 && dev.index < static_cast<int>(cuda_devices().size())) {
    tune::ModelWarmupOptions o;
    o.tune = a.tune;
    o.max_seconds = a.tune_seconds;
    const tune::EngineLimits limits{tune::next_pow2(a.max_step_tokens), a.max_running};
    tune::warm_up_for_model(tune::plan_model_from_config(config), dev.index, limits, o);
  }
  // The tokenizer first: a broken one is reported before the weights load.
  std::shared_ptr<Tokenizer> tok;
  const std::string tok_path = a.tokenizer.empty() ? a.model : a.tokenizer;
  const bool have_file =
      !a.tokenizer.empty() || path_kind((std::filesystem::path(a.model) / "tokenizer.json").string()) != PathKind::Missing;
  if (a.use_tokenizer && have_file) {
    tok = Tokenizer::load(tok_path);
    log_info("tokenizer {}: {} ids", tok_path, tok->vocab_size());
  } else {
    log_info("no tokenizer: prompts are token ids, responses carry token_ids and empty text");
  }
  std::shared_ptr<const chat::PromptFormat> format;  // before the weights: a broken template fails fast
  if (tok) format = chat::load_prompt_format(a.model, std::string(model::arch_name(config.arch)),
                                             a.chat_template);
  LoadedModel loaded = load_model(a.model, dev, a.tensor_parallel, {.mtp = a.speculative_tokens > 0, .weights = source},
                                  a.speculative_tokens, a.dist);
  if (loaded.follower()) return loaded.serve_rank_steps();  // rank 0's process serves HTTP
  model::CausalLM* lm = &loaded.lm();
  if (tok && tok->vocab_size() > lm->config().vocab_size)
    log_warn("the tokenizer has {} ids, the model's vocabulary {}: prompts using the ids above are refused (400)",
             tok->vocab_size(), lm->config().vocab_size);
  engine::EngineOptions eo;
  eo.max_running = a.max_running;
  eo.max_step_tokens = a.max_step_tokens;
  eo.max_prefill_chunk = a.max_prefill_chunk;
  eo.max_model_len = a.max_model_len;
  eo.memory.gpu_memory_utilization = a.gpu_memory_utilization;
  eo.memory.kv_cache_bytes = a.kv_cache_memory;
  eo.cuda_graphs = !a.enforce_eager;
  eo.graph_max_batch = a.max_graph_batch;
  eo.speculative_tokens = a.speculative_tokens;
  eo.speculative_acceptance = acceptance;
  eo.eos_token_ids = eos_ids(a.model);
  if (tok && tok->eos_id() && std::find(eo.eos_token_ids.begin(), eo.eos_token_ids.end(), *tok->eos_id()) ==
                                  eo.eos_token_ids.end())
    eo.eos_token_ids.push_back(*tok->eos_id());
  const std::unique_ptr<engine::Engine> owned_engine = loaded.engine(eo);
  engine::Engine& eng = *owned_engine;
  eng.capture_decode_graphs();  // after the tuner (above): the graphs hold its tactics; logs a line per bucket
  server::ServerOptions so;
  so.host = a.host;
  so.port = a.port;
  so.http.max_workers = a.threads;
  so.http.header_timeout_s = a.header_timeout;
  so.http.idle_timeout_s = a.idle_timeout;
  so.http.read_timeout_s = a.read_timeout;
  so.max_queue = a.max_queue;
  so.max_request_bytes = a.max_request_bytes;
  so.api_key = a.api_key;
  so.allowed_origins = split_list(a.allowed_origins);
  so.model_name = a.name.empty() ? std::filesystem::path(a.model).filename().string() : a.name;
  if (so.model_name.empty()) so.model_name = std::filesystem::path(a.model).parent_path().filename().string();
  if (so.model_name.empty()) so.model_name = "dsa";
  if (tok) {
    so.encode = [tok](const std::string& text, bool special) { return tok->encode(text, special); };
    so.decode = [tok](const std::vector<int32_t>& ids, bool skip) { return tok->decode(ids, skip); };
    auto chat = std::make_shared<server::ChatServing>();
    chat->format = format;
    chat->encode = [tok](const std::string& text) { return tok->encode(text, /*add_special_tokens=*/false); };
    chat->decode = reply_decoder(tok, format->syntax());
    log_info("chat: {}", chat->format->name());
    so.chat = std::move(chat);
  }
  server::Server srv(eng, so);
  const int port = srv.bind();
  signals.serve(&srv, std::chrono::milliseconds(static_cast<int64_t>(a.shutdown_timeout * 1000)));
  log_info("serving {} on http://{}:{} ({}; max_num_seqs {}, max_num_batched_tokens {}, context {}{})", so.model_name,
           a.host, port, lm->device().str() + (loaded.tp_size() > 1 ? fmt::format(" x {} ranks", loaded.tp_size()) : ""),
           eo.max_running, eo.max_step_tokens, eng.max_model_len(),
           so.api_key.empty() ? "" : "; API key required");
  srv.listen();
  signals.unserve();
  srv.stop();
  log_info("server stopped");
#else
  (void)args;
  fail("dsa serve: this build has no HTTP server (configured without cpp-httplib or with DSA_SERVER=OFF: install "
       "libcpp-httplib-dev and reconfigure)");
#endif
}

const bool registered = add_command([](CLI::App& app) {
  auto* cmd = app.add_subcommand("serve", "OpenAI-compatible HTTP server (/v1/completions, /v1/chat/completions with a tokenizer)");
  auto a = std::make_shared<Args>();
  // Not named "model": newer CLI11 releases (the GPU machine's) refuse a positional named like --model.
  cmd->add_option("checkpoint", a->model_pos, "Checkpoint directory (config.json + safetensors)");
  cmd->add_option("--model", a->model, "Checkpoint directory (same as the positional argument)");
  add_load_format_options(cmd, a->load);
  cmd->add_option("--host", a->host, "Address to listen on")->capture_default_str();
  cmd->add_option("--port", a->port, "Port (0: any free port)")->capture_default_str();
  cmd->add_option("--device", a->device, "cpu (default), cuda or cuda:N");
  cmd->add_option("--served-model-name", a->name, "Model id in /v1/models and responses (default: the dir name)");
  cmd->add_option("--speculative-tokens", a->speculative_tokens,
                  "Tokens the checkpoint's MTP layer drafts per decode step, verified in one forward (default 0: off)");
  cmd->add_option("--speculative-acceptance", a->speculative_acceptance,
                  "How sampled requests' drafts are verified: rejection (rejection sampling: the target's "
                  "distribution, more accepted drafts) or exact (the same tokens as without drafts for a seeded "
                  "request); greedy requests accept by argmax match either way")
      ->capture_default_str();
  cmd->add_option("--tensor-parallel-size", a->tensor_parallel,
                  "Ranks the model is sharded over (GLM-5.1 or DeepSeek-V4; threads of this process, rank r on device --device + r "
                  "when there are that many, else all on --device; or one per process with --nnodes)")
      ->capture_default_str();
  add_dist_options(cmd, a->dist);
  cmd->add_option("--max-num-seqs,--max-running", a->max_running, "Engine limit: sequences running at once")
      ->capture_default_str();
  cmd->add_option("--max-num-batched-tokens,--max-step-tokens", a->max_step_tokens, "Engine limit: tokens of one forward")
      ->capture_default_str();
  cmd->add_option("--max-prefill-chunk", a->max_prefill_chunk, "Prompt tokens of one sequence per step (0: no cap)")
      ->capture_default_str();
  cmd->add_option("--max-model-len", a->max_model_len, "Prompt + max_tokens bound (0: the model's context)")
      ->capture_default_str();
  cmd->add_option("--gpu-memory-utilization", a->gpu_memory_utilization,
                  "CUDA: fraction of device memory dsa may use in all (weights + KV cache + activations)")
      ->capture_default_str();
  cmd->add_option("--kv-cache-memory", a->kv_cache_memory,
                  "KV cache bytes (overrides --gpu-memory-utilization; on the CPU the default is 1 GiB)");
  cmd->add_flag("--enforce-eager", a->enforce_eager,
                "CUDA: run every step eagerly (default: decode steps whose shape repeats replay as CUDA graphs)");
  cmd->add_option("--max-graph-batch", a->max_graph_batch,
                  "CUDA graphs: decode steps of up to this many sequences are padded to a batch bucket (1, 2, 4, ...) "
                  "whose graphs are captured at start-up (0: --max-num-seqs; -1: no padding, graphs per exact size, "
                  "captured lazily)")
      ->capture_default_str();
  cmd->add_option("--max-queue", a->max_queue, "Sequences waiting to run; more: 503 with Retry-After (0: no bound)")
      ->capture_default_str();
  cmd->add_option("--max-request-bytes", a->max_request_bytes, "Largest request body (413 above, unread)")
      ->capture_default_str();
  cmd->add_option("--api-key", a->api_key, "Require \"Authorization: Bearer KEY\" on /v1/* and /tokenize "
                                          "(/health, /metrics stay open)")
      ->envname("DSA_API_KEY");
  cmd->add_option("--allowed-origins", a->allowed_origins, "CORS: comma-separated origins allowed, or *");
  cmd->add_option("--header-timeout", a->header_timeout, "Seconds a client has to send a request's headers")
      ->capture_default_str();
  cmd->add_option("--idle-timeout", a->idle_timeout, "Seconds an idle keep-alive connection stays open")
      ->capture_default_str();
  cmd->add_option("--read-timeout", a->read_timeout, "Seconds a client has to send a request's body")
      ->capture_default_str();
  cmd->add_option("--shutdown-timeout", a->shutdown_timeout, "SIGTERM/SIGINT: seconds requests in progress get to finish")
      ->capture_default_str();
  cmd->add_option("--threads", a->threads, "HTTP workers: requests in progress at once (each open stream holds one)")
      ->capture_default_str();
  cmd->add_option("--log-level", a->log_level, "debug, info (default; one line per request), warn or error");
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
