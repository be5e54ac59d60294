// A served tiny GLM checkpoint for the server tests: written to a temp dir, loaded on the CPU,
// an engine with small limits, and a Server bound to 127.0.0.1 on an ephemeral port, listening
// on its own thread (ready when /health answers). Optionally with the test tokenizer
// (tests/data/server/tokenizer.json: byte-level BPE, <s> = BOS added to text prompts) and a
// small KV cache. Also the engine's own results for comparison (a fresh engine over a fresh
// model with the same options) and small client helpers.
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
#include "dsa/tokenizer/tokenizer.h"

namespace dsa::server::test {

engine::EngineOptions harness_engine_options();  // max_running 4, 48 tokens a step, chunks of 16, eos 1,
                                                 // context 256

struct HarnessOptions {
  bool tokenizer = false;  // serve text with the test tokenizer
  int64_t kv_pages = 0;    // GLM KV pages of 64 tokens (0: the model's default)
};

// The test tokenizer (nullptr, with a message on stderr, when this build cannot load it: no PCRE2).
std::shared_ptr<Tokenizer> test_tokenizer();

struct Harness {
  explicit Harness(ServerOptions options, HarnessOptions h = {});  // options.port is replaced by 0 (ephemeral)
  ~Harness();                                                      // stops the server, removes the checkpoint

  std::vector<engine::Completion> reference(const std::vector<std::vector<int32_t>>& prompts,
                                            const std::vector<engine::SamplingParams>& params);
  // The reference model's f32 logits of every position of one prompt ([len][vocab], row-major).
  std::vector<float> reference_logits(const std::vector<int32_t>& tokens);
  httplib::Client client() const;  // 60 s read/write timeouts
  httplib::Result post(const nlohmann::json& body, const char* path = "/v1/completions") const;
  std::string metrics() const;     // GET /metrics body ("" on failure)

  std::filesystem::path dir;
  HarnessOptions hopt;
  std::shared_ptr<Tokenizer> tok;
  std::unique_ptr<model::CausalLM> lm, ref_lm;
  std::unique_ptr<engine::Engine> engine;
  std::unique_ptr<Server> server;
  std::thread thread;
  int port = 0;
};

// The data: payloads of an SSE body in order ([DONE] last); fails the test on other lines.
std::vector<std::string> sse_data(const std::string& body);
std::vector<int32_t> prompt_of(int64_t n, uint64_t seed);  // ids in [2, 502)
// The value of one series in a /metrics page (-1 when absent).
double metric_value(const std::string& text, const std::string& series);

}  // namespace dsa::server::test
