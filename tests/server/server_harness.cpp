#include "server_harness.h"

#include <chrono>
#include <random>

#include <gtest/gtest.h>
#include <unistd.h>

#include "dsa/core/error.h"
#include "dsa/model/checkpoint_tiny.h"

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

Harness::Harness(ServerOptions options) {
  static int n = 0;
  dir = std::filesystem::temp_directory_path() /
        ("dsa_server_glm_" + std::to_string(::getpid()) + "_" + std::to_string(n++));
  TinyOptions t;
  t.arch = "glm_moe_dsa";
  t.seed = 1;
  make_tiny_checkpoint(t, dir.string());
  lm = model::load_causal_lm(dir.string(), Device::cpu());
  engine = std::make_unique<engine::Engine>(*lm, harness_engine_options());
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
  if (!ref_lm) ref_lm = model::load_causal_lm(dir.string(), Device::cpu());  // the served one is the server's
  engine::Engine e(*ref_lm, harness_engine_options());
  return e.generate(prompts, params);
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

}  // namespace dsa::server::test
