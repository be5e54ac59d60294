// The HTTP server in-process on 127.0.0.1 (ephemeral port) over the tiny GLM checkpoint on the
// CPU, driven with httplib's client: JSON shapes, token counts, greedy and seeded outputs equal to
// the engine's own (computed before the server starts, with the same engine options), SSE
// streaming with [DONE] and include_usage, concurrent clients, and OpenAI-style 400 errors.
// Loopback only; every client call has a 60 s timeout.
#include <gtest/gtest.h>

#include <filesystem>
#include <random>
#include <thread>

#include <httplib.h>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include "dsa/engine/engine.h"
#include "dsa/model/causal_lm.h"
#include "dsa/model/checkpoint_tiny.h"
#include "dsa/server/server.h"

namespace dsa::server {
namespace {

using json = nlohmann::json;

engine::EngineOptions engine_options() {
  engine::EngineOptions o;
  o.max_running = 4;
  o.max_step_tokens = 48;
  o.max_prefill_chunk = 16;
  o.eos_token_ids = {1};  // the tiny config's eos
  return o;
}

std::vector<int32_t> prompt_of(int64_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<int32_t> p;
  for (int64_t i = 0; i < n; ++i) p.push_back(static_cast<int32_t>(2 + rng() % 500));
  return p;
}

class ServerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = std::filesystem::temp_directory_path() / ("dsa_server_glm_" + std::to_string(::getpid()));
    TinyOptions t;
    t.arch = "glm_moe_dsa";
    t.seed = 1;
    make_tiny_checkpoint(t, dir_.string());
    lm_ = model::load_causal_lm(dir_.string(), Device::cpu());
    engine_ = std::make_unique<engine::Engine>(*lm_, engine_options());
    ServerOptions so;
    so.port = 0;
    so.model_name = "tiny-glm";
    server_ = std::make_unique<Server>(*engine_, so);
    port_ = server_->bind();
    thread_ = std::thread([] { server_->listen(); });
    httplib::Client c("127.0.0.1", port_);
    for (int i = 0; i < 100; ++i) {  // up to 5 s for the listener
      if (auto r = c.Get("/health"); r && r->status == 200) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    FAIL() << "the server did not answer /health";
  }
  static void TearDownTestSuite() {
    server_->stop();
    if (thread_.joinable()) thread_.join();
    server_.reset();
    engine_.reset();
    lm_.reset();
    std::filesystem::remove_all(dir_);
  }

  // What the engine gives for these requests, on a fresh engine over a fresh model (the served
  // one belongs to the server's thread).
  static std::vector<engine::Completion> reference(const std::vector<std::vector<int32_t>>& prompts,
                                                   const std::vector<engine::SamplingParams>& params) {
    static std::unique_ptr<model::CausalLM> lm = model::load_causal_lm(dir_.string(), Device::cpu());
    engine::Engine e(*lm, engine_options());
    return e.generate(prompts, params);
  }

  static httplib::Client client() {
    httplib::Client c("127.0.0.1", port_);
    c.set_read_timeout(60, 0);
    c.set_write_timeout(60, 0);
    c.set_connection_timeout(10, 0);
    return c;
  }
  static httplib::Result post(const json& body, const char* path = "/v1/completions") {
    return client().Post(path, body.dump(), "application/json");
  }
  // The data: lines of an SSE body, [DONE] last.
  static std::vector<std::string> sse_data(const std::string& body) {
    std::vector<std::string> out;
    size_t pos = 0;
    while (pos < body.size()) {
      size_t end = body.find("\n\n", pos);
      if (end == std::string::npos) end = body.size();
      const std::string ev = body.substr(pos, end - pos);
      if (ev.rfind("data: ", 0) == 0) out.push_back(ev.substr(6));
      else if (!ev.empty()) ADD_FAILURE() << "not an SSE data event: " << ev;
      pos = end + 2;
    }
    return out;
  }

  static inline std::filesystem::path dir_;
  static inline std::unique_ptr<model::CausalLM> lm_;
  static inline std::unique_ptr<engine::Engine> engine_;
  static inline std::unique_ptr<Server> server_;
  static inline std::thread thread_;
  static inline int port_ = 0;
};

engine::SamplingParams greedy(int64_t n) {
  engine::SamplingParams p;
  p.max_tokens = n;
  return p;
}

TEST_F(ServerTest, HealthAndModels) {
  auto h = client().Get("/health");
  ASSERT_TRUE(h);
  EXPECT_EQ(h->status, 200);
  auto m = client().Get("/v1/models");
  ASSERT_TRUE(m);
  ASSERT_EQ(m->status, 200);
  const json j = json::parse(m->body);
  EXPECT_EQ(j["object"], "list");
  ASSERT_EQ(j["data"].size(), 1u);
  EXPECT_EQ(j["data"][0]["id"], "tiny-glm");
  EXPECT_EQ(j["data"][0]["object"], "model");
  EXPECT_EQ(j["data"][0]["max_model_len"], lm_->config().max_position_embeddings);
}

TEST_F(ServerTest, GreedyCompletionEqualsEngine) {
  const auto p = prompt_of(23, 1);
  const auto want = reference({p}, {greedy(6)})[0];
  auto r = post({{"model", "tiny-glm"}, {"prompt", p}, {"max_tokens", 6}, {"temperature", 0}});
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  const json j = json::parse(r->body);
  EXPECT_EQ(j["object"], "text_completion");
  EXPECT_EQ(j["model"], "tiny-glm");
  EXPECT_TRUE(j["id"].is_string());
  ASSERT_EQ(j["choices"].size(), 1u);
  const json& c = j["choices"][0];
  EXPECT_EQ(c["token_ids"].get<std::vector<int32_t>>(), want.tokens);
  EXPECT_EQ(c["finish_reason"], engine::finish_reason_name(want.finish));
  EXPECT_EQ(j["usage"]["prompt_tokens"], 23);
  EXPECT_EQ(j["usage"]["completion_tokens"], want.tokens.size());
  EXPECT_EQ(j["usage"]["total_tokens"], 23 + want.tokens.size());
}

TEST_F(ServerTest, StreamingChunksEndWithDone) {
  const auto p = prompt_of(9, 2);
  const auto want = reference({p}, {greedy(5)})[0];
  for (bool usage : {false, true}) {
    json body = {{"prompt", p}, {"max_tokens", 5}, {"temperature", 0}, {"stream", true}};
    if (usage) body["stream_options"] = {{"include_usage", true}};
    auto r = post(body);
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 200) << r->body;
    EXPECT_NE(r->get_header_value("Content-Type").find("text/event-stream"), std::string::npos);
    const auto data = sse_data(r->body);
    ASSERT_GE(data.size(), 2u);
    EXPECT_EQ(data.back(), "[DONE]");
    std::vector<int32_t> tokens;
    std::string finish;
    json usage_chunk;
    for (size_t i = 0; i + 1 < data.size(); ++i) {
      const json j = json::parse(data[i]);
      EXPECT_EQ(j["object"], "text_completion");
      if (usage) {
        EXPECT_TRUE(j.contains("usage"));
      }
      if (j["choices"].empty()) {
        usage_chunk = j;
        continue;
      }
      EXPECT_TRUE(finish.empty()) << "a chunk after the finish";
      const json& c = j["choices"][0];
      for (int32_t t : c["token_ids"].get<std::vector<int32_t>>()) tokens.push_back(t);
      if (!c["finish_reason"].is_null()) finish = c["finish_reason"];
    }
    EXPECT_EQ(tokens, want.tokens);
    EXPECT_EQ(finish, engine::finish_reason_name(want.finish));
    if (usage) {
      ASSERT_FALSE(usage_chunk.is_null()) << "no usage chunk";
      EXPECT_EQ(usage_chunk["usage"]["prompt_tokens"], 9);
      EXPECT_EQ(usage_chunk["usage"]["completion_tokens"], want.tokens.size());
    } else {
      EXPECT_TRUE(usage_chunk.is_null());
    }
  }
}

TEST_F(ServerTest, ConcurrentClientsGetTheirOwnTokens) {
  const std::vector<int64_t> lengths{4, 31, 12, 50, 7, 19};
  std::vector<std::vector<int32_t>> prompts;
  for (size_t i = 0; i < lengths.size(); ++i) prompts.push_back(prompt_of(lengths[i], 10 + i));
  const auto want = reference(prompts, {greedy(8)});
  std::vector<std::vector<int32_t>> got(prompts.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < prompts.size(); ++i)
    threads.emplace_back([&, i] {
      const bool stream = i % 2 == 1;
      auto r = post({{"prompt", prompts[i]}, {"max_tokens", 8}, {"temperature", 0}, {"stream", stream}});
      if (!r || r->status != 200) return;
      if (!stream) {
        got[i] = json::parse(r->body)["choices"][0]["token_ids"].get<std::vector<int32_t>>();
        return;
      }
      for (const std::string& d : sse_data(r->body)) {
        if (d == "[DONE]") break;
        for (int32_t t : json::parse(d)["choices"][0]["token_ids"].get<std::vector<int32_t>>()) got[i].push_back(t);
      }
    });
  for (auto& t : threads) t.join();
  for (size_t i = 0; i < prompts.size(); ++i) EXPECT_EQ(got[i], want[i].tokens) << "prompt " << i;
}

TEST_F(ServerTest, SeededSamplingAndStopIds) {
  const auto p = prompt_of(11, 3);
  engine::SamplingParams sp;
  sp.max_tokens = 10;
  sp.temperature = 0.9;
  sp.top_k = 40;
  sp.top_p = 0.9;
  sp.seed = 77;
  sp.ignore_eos = true;
  const auto want = reference({p}, {sp})[0];
  const json body = {{"prompt", p}, {"max_tokens", 10}, {"temperature", 0.9}, {"top_k", 40},
                     {"top_p", 0.9}, {"seed", 77}, {"ignore_eos", true}};
  for (int rep = 0; rep < 2; ++rep) {
    auto r = post(body);
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 200) << r->body;
    EXPECT_EQ(json::parse(r->body)["choices"][0]["token_ids"].get<std::vector<int32_t>>(), want.tokens);
  }
  // Stop at the greedy output's third token.
  const auto g = reference({p}, {greedy(10)})[0].tokens;
  ASSERT_GE(g.size(), 3u);
  auto r = post({{"prompt", p}, {"max_tokens", 10}, {"temperature", 0}, {"stop_token_ids", {g[2]}}});
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  const json j = json::parse(r->body);
  const auto toks = j["choices"][0]["token_ids"].get<std::vector<int32_t>>();
  ASSERT_FALSE(toks.empty());
  EXPECT_EQ(toks.back(), g[2]);
  EXPECT_LE(toks.size(), 3u);
  EXPECT_EQ(j["choices"][0]["finish_reason"], "stop");
}

TEST_F(ServerTest, BadRequestsAre400WithOpenAiErrors) {
  const int64_t V = lm_->config().vocab_size;
  const std::vector<int32_t> too_long(static_cast<size_t>(engine_->max_model_len()), 5);
  struct Case {
    std::string body;
    std::string param;
  };
  const std::vector<Case> cases{
      {"{not json", ""},
      {"[1, 2]", ""},
      {json{{"max_tokens", 3}}.dump(), "prompt"},
      {json{{"prompt", "hello"}}.dump(), "prompt"},  // no tokenizer
      {json{{"prompt", json::array()}}.dump(), "prompt"},
      {json{{"prompt", {1, V}}}.dump(), "prompt"},
      {json{{"prompt", {1, -1}}}.dump(), "prompt"},
      {json{{"prompt", {1, 2.5}}}.dump(), "prompt"},
      {json{{"prompt", {{1, 2}, {3}}}}.dump(), "prompt"},
      {json{{"prompt", too_long}, {"max_tokens", 1}}.dump(), "prompt"},
      {json{{"prompt", {1, 2}}, {"max_tokens", "abc"}}.dump(), "max_tokens"},
      {json{{"prompt", {1, 2}}, {"max_tokens", 0}}.dump(), "max_tokens"},
      {json{{"prompt", {1, 2}}, {"temperature", "hot"}}.dump(), "temperature"},
      {json{{"prompt", {1, 2}}, {"top_p", 2}}.dump(), "top_p"},
      {json{{"prompt", {1, 2}}, {"n", 2}}.dump(), "n"},
      {json{{"prompt", {1, 2}}, {"stream", "yes"}}.dump(), "stream"},
      {json{{"prompt", {1, 2}}, {"stop_token_ids", {V}}}.dump(), "stop_token_ids"},
      {json{{"prompt", {1, 2}}, {"stop", "\n"}}.dump(), "stop"},
  };
  for (const Case& c : cases) {
    auto r = client().Post("/v1/completions", c.body, "application/json");
    ASSERT_TRUE(r) << c.body;
    EXPECT_EQ(r->status, 400) << c.body << " -> " << r->body;
    const json j = json::parse(r->body, nullptr, false);
    ASSERT_TRUE(j.is_object() && j.contains("error")) << r->body;
    EXPECT_EQ(j["error"]["type"], "invalid_request_error");
    EXPECT_EQ(j["error"]["code"], 400);
    EXPECT_FALSE(j["error"]["message"].get<std::string>().empty());
    if (!c.param.empty()) {
      EXPECT_EQ(j["error"]["param"], c.param) << c.body << " -> " << r->body;
    }
  }
  auto chat = post({{"messages", json::array()}}, "/v1/chat/completions");
  ASSERT_TRUE(chat);
  EXPECT_EQ(chat->status, 501);
  EXPECT_TRUE(json::parse(chat->body).contains("error"));
  auto missing = client().Get("/v1/nothing");
  ASSERT_TRUE(missing);
  EXPECT_EQ(missing->status, 404);
  // The server still serves after all that.
  auto ok = post({{"prompt", {3, 4}}, {"max_tokens", 2}, {"temperature", 0}});
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200);
}

int64_t metric(const std::string& text, const std::string& series) {
  const size_t at = text.find("\n" + series + " ");
  if (at == std::string::npos) return -1;
  return std::stoll(text.substr(at + series.size() + 2));
}

// A streaming client that goes away mid-stream aborts its request (the engine stops running
// it long before its max_tokens); /metrics shows it.
TEST_F(ServerTest, DisconnectedStreamIsAbortedAndMetricsShowIt) {
  auto m0 = client().Get("/metrics");
  ASSERT_TRUE(m0);
  ASSERT_EQ(m0->status, 200);
  const int64_t aborted0 = metric(m0->body, "dsa_requests_finished_total{reason=\"abort\"}");
  ASSERT_GE(aborted0, 0) << m0->body;
  EXPECT_GE(metric(m0->body, "dsa_generation_tokens_total"), 0);

  httplib::Request req;
  req.method = "POST";
  req.path = "/v1/completions";
  req.body = json{{"prompt", {5, 6, 7}}, {"max_tokens", 3000}, {"ignore_eos", true}, {"stream", true}}.dump();
  req.set_header("Content-Type", "application/json");
  int chunks = 0;
  req.content_receiver = [&](const char*, size_t, uint64_t, uint64_t) { return ++chunks < 2; };  // then hang up
  auto c = client();
  c.send(req);
  EXPECT_GE(chunks, 1);
  int64_t aborted = aborted0, running = -1;
  for (int i = 0; i < 400 && !(aborted > aborted0 && running == 0); ++i) {  // up to 20 s
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    auto m = client().Get("/metrics");
    ASSERT_TRUE(m);
    aborted = metric(m->body, "dsa_requests_finished_total{reason=\"abort\"}");
    running = metric(m->body, "dsa_requests_running");
  }
  EXPECT_EQ(aborted, aborted0 + 1);
  EXPECT_EQ(running, 0);
}

// Request parsing alone: a string prompt goes through the tokenizer when there is one; defaults.
TEST(OpenAiProtocol, ParsesPromptsAndDefaults) {
  const EncodeFn enc = [](const std::string& s) {
    std::vector<int32_t> v;
    for (char ch : s) v.push_back(static_cast<unsigned char>(ch));
    return v;
  };
  CompletionRequest r = parse_completion_request(R"({"prompt": "AB"})", enc);
  EXPECT_EQ(r.prompt, (std::vector<int32_t>{65, 66}));
  EXPECT_TRUE(r.echo_text);
  EXPECT_EQ(r.params.max_tokens, 16);
  EXPECT_EQ(r.params.temperature, 1.0);
  EXPECT_FALSE(r.stream);
  r = parse_completion_request(
      R"({"prompt": [7], "top_k": -1, "seed": 5, "stream": true, "stream_options": {"include_usage": true}})", {});
  EXPECT_EQ(r.params.top_k, 0);
  EXPECT_EQ(r.params.seed, 5u);
  EXPECT_TRUE(r.include_usage);
  EXPECT_THROW(parse_completion_request(R"({"prompt": "AB"})", {}), BadRequest);
  EXPECT_THROW(parse_completion_request(R"({"prompt": [1], "stream_options": {"include_usage": true}})", {}),
               BadRequest);
}

}  // namespace
}  // namespace dsa::server
