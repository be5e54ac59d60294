#include "server_harness.h"

#include <chrono>
#include <cstdio>
#include <random>

#include <gtest/gtest.h>
#include <unistd.h>

#include "dsa/core/error.h"
#include "dsa/model/checkpoint_tiny.h"
#include "dsa/engine/session.h"

namespace dsa::server::test {

engine::EngineOptions harness_engine_options() {
  engine::EngineOptions o;
  o.max_running = 4;
  o.max_step_tokens = 48;
  o.max_prefill_chunk = 16;
  o.eos_token_ids = {1};  // the tiny config's eos
  o.max_model_len = 256;  // long-prompt cases stay quick on the CPU
  return o;
}

std::shared_ptr<Tokenizer> test_tokenizer() {
  try {
    return std::shared_ptr<Tokenizer>(Tokenizer::load(std::string(DSA_TEST_DATA_DIR) + "/server/tokenizer.json"));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "test tokenizer unavailable: %s\n", e.what());
    return nullptr;
  }
}

namespace {
std::unique_ptr<model::CausalLM> load(const std::filesystem::path& dir) {
  return model::load_causal_lm(dir.string(), Device::cpu());
}

// The harness's engine limits with a KV cache of `kv_pages` pages of 64 tokens (0: the default
// budget); the context is cut to what the pages hold, as the engine requires.
engine::EngineOptions engine_options(int64_t kv_pages) {
  engine::EngineOptions o = harness_engine_options();
  if (kv_pages > 0) {
    o.kv_blocks = kv_pages;
    o.max_model_len = std::min<int64_t>(o.max_model_len, kv_pages * 64);
  }
  return o;
}
}  // namespace

Harness::Harness(ServerOptions options, HarnessOptions h) : hopt(h) {
  static int n = 0;
  dir = std::filesystem::temp_directory_path() /
        ("dsa_server_glm_" + std::to_string(::getpid()) + "_" + std::to_string(n++));
  TinyOptions t;
  t.arch = "glm_moe_dsa";
  t.seed = 1;
  make_tiny_checkpoint(t, dir.string());
  if (h.tokenizer) {
    tok = test_tokenizer();
    DSA_CHECK(tok != nullptr, "the test tokenizer cannot be loaded");
    auto tk = tok;
    options.encode = [tk](const std::string& s, bool special) { return tk->encode(s, special); };
    options.decode = [tk](const std::vector<int32_t>& ids, bool skip) { return tk->decode(ids, skip); };
  }
  lm = load(dir);
  engine = std::make_unique<engine::Engine>(*lm, engine_options(h.kv_pages));
  options.port = 0;
  server = std::make_unique<Server>(*engine, options);
  port = server->bind();
  thread = std::thread([this] { server->listen(); });
  httplib::Client c("127.0.0.1", port);
  for (int i = 0; i < 100; ++i) {  // up to 5 s for the listener
    if (auto r = c.Get("/health"); r && r->status == 200) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  fail("the test server did not answer /health on port {}", port);
}

Harness::~Harness() {
  server->stop();
  if (thread.joinable()) thread.join();
  server.reset();
  engine.reset();
  lm.reset();
  ref_lm.reset();
  std::filesystem::remove_all(dir);
}

std::vector<engine::Completion> Harness::reference(const std::vector<std::vector<int32_t>>& prompts,
                                                   const std::vector<engine::SamplingParams>& params) {
  if (!ref_lm) ref_lm = load(dir);  // the served one is the server's
  engine::Engine e(*ref_lm, engine_options(hopt.kv_pages));
  return e.generate(prompts, params);
}

std::vector<float> Harness::reference_logits(const std::vector<int32_t>& tokens) {
  if (!ref_lm) ref_lm = load(dir);
  engine::Session session(*ref_lm);
  const kv::RequestId id = session.add_request();
  const engine::ForwardBatch b = engine::ForwardBatch::of(id, tokens);
  const Tensor l = session.forward(b, /*all_logits=*/true);
  session.free_request(id);
  const float* p = l.data<float>();
  return std::vector<float>(p, p + l.numel());
}

httplib::Client Harness::client() const {
  httplib::Client c("127.0.0.1", port);
  c.set_read_timeout(60, 0);
  c.set_write_timeout(60, 0);
  c.set_connection_timeout(10, 0);
  return c;
}

httplib::Result Harness::post(const nlohmann::json& body, const char* path) const {
  return client().Post(path, body.dump(), "application/json");
}

std::string Harness::metrics() const {
  auto r = client().Get("/metrics");
  return r && r->status == 200 ? r->body : std::string();
}

std::vector<std::string> sse_data(const std::string& body) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos < body.size()) {
    size_t end = body.find("\n\n", pos);
    if (end == std::string::npos) end = body.size();
    const std::string ev = body.substr(pos, end - pos);
    if (ev.rfind("data: ", 0) == 0)
      out.push_back(ev.substr(6));
    else if (!ev.empty())
      ADD_FAILURE() << "not an SSE data event: " << ev;
    pos = end + 2;
  }
  return out;
}

std::vector<int32_t> prompt_of(int64_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<int32_t> p;
  for (int64_t i = 0; i < n; ++i) p.push_back(static_cast<int32_t>(2 + rng() % 500));
  return p;
}

double metric_value(const std::string& text, const std::string& series) {
  const size_t at = text.find("\n" + series + " ");
  if (at == std::string::npos) return -1;
  return std::stod(text.substr(at + series.size() + 2));
}

}  // namespace dsa::server::test
