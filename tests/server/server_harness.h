// A served tiny GLM checkpoint for the server tests: written to a temp dir, loaded on the CPU,
// an engine with small limits, and a Server bound to 127.0.0.1 on an ephemeral port, listening
// on its own thread (ready when /health answers). Also the engine's own results for comparison
// (a fresh engine over a fresh model with the same options) and small client helpers.
#pragma once
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <httplib.h>
#include <nlohmann/json.hpp>

#include "dsa/engine/engine.h"
#include "dsa/model/causal_lm.h"
#include "dsa/server/server.h"

namespace dsa::server::test {

engine::EngineOptions harness_engine_options();  // max_running 4, 48 tokens a step, chunks of 16, eos 1,
                                                 // context 256

struct Harness {
  explicit Harness(ServerOptions options);  // options.port is replaced by 0 (ephemeral)
  ~Harness();                               // stops the server, removes the checkpoint

  std::vector<engine::Completion> reference(const std::vector<std::vector<int32_t>>& prompts,
                                            const std::vector<engine::SamplingParams>& params);
  httplib::Client client() const;  // 60 s read/write timeouts
  httplib::Result post(const nlohmann::json& body, const char* path = "/v1/completions") const;

  std::filesystem::path dir;
  std::unique_ptr<model::CausalLM> lm, ref_lm;
  std::unique_ptr<engine::Engine> engine;
  std::unique_ptr<Server> server;
  std::thread thread;
  int port = 0;
};

// The data: payloads of an SSE body in order ([DONE] last); fails the test on other lines.
std::vector<std::string> sse_data(const std::string& body);
std::vector<int32_t> prompt_of(int64_t n, uint64_t seed);  // ids in [2, 502)

}  // namespace dsa::server::test
