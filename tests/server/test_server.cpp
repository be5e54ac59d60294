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
#include "dsa/server/text_stream.h"
#include "server_harness.h"

namespace dsa::server {
namespace {

using json = nlohmann::json;
using namespace dsa::server::test;

class ServerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    ServerOptions so;
    so.model_name = "tiny-glm";
    h_ = new Harness(so);
  }
  static void TearDownTestSuite() {
    delete h_;
    h_ = nullptr;
  }
  static std::vector<engine::Completion> reference(const std::vector<std::vector<int32_t>>& prompts,
                                                   const std::vector<engine::SamplingParams>& params) {
    return h_->reference(prompts, params);
  }
  static httplib::Client client() { return h_->client(); }
  static httplib::Result post(const json& body, const char* path = "/v1/completions") { return h_->post(body, path); }
  static inline Harness* h_ = nullptr;
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
  EXPECT_EQ(j["data"][0]["max_model_len"], 256);
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
  const int64_t V = h_->lm->config().vocab_size;
  const std::vector<int32_t> too_long(static_cast<size_t>(h_->engine->max_model_len()), 5);
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
      {json{{"prompt", {{1, 2}, json::array()}}}.dump(), "prompt"},
      {json{{"prompt", {{1, 2}, 3}}}.dump(), "prompt"},
      {json{{"prompt", too_long}, {"max_tokens", 1}}.dump(), "prompt"},
      {json{{"prompt", {1, 2}}, {"max_tokens", "abc"}}.dump(), "max_tokens"},
      {json{{"prompt", {1, 2}}, {"max_tokens", 0}}.dump(), "max_tokens"},
      {json{{"prompt", {1, 2}}, {"temperature", "hot"}}.dump(), "temperature"},
      {json{{"prompt", {1, 2}}, {"top_p", 2}}.dump(), "top_p"},
      {json{{"prompt", {1, 2}}, {"n", 0}}.dump(), "n"},
      {json{{"prompt", {1, 2}}, {"n", 3}, {"best_of", 2}}.dump(), "best_of"},
      {json{{"prompt", {1, 2}}, {"best_of", 2}, {"stream", true}}.dump(), "best_of"},
      {json{{"prompt", {1, 2}}, {"suffix", "x"}}.dump(), "suffix"},
      {json{{"prompt", {1, 2}}, {"use_beam_search", true}}.dump(), "use_beam_search"},
      {json{{"prompt", {1, 2}}, {"frobnicate", 1}}.dump(), "frobnicate"},
      {json{{"prompt", {1, 2}}, {"logprobs", 21}}.dump(), "logprobs"},
      {json{{"prompt", {1, 2}}, {"logprobs", true}}.dump(), "logprobs"},
      {json{{"prompt", {1, 2}}, {"max_tokens", 0}}.dump(), "max_tokens"},
      {json{{"prompt", {1, 2}}, {"presence_penalty", 3}}.dump(), "presence_penalty"},
      {json{{"prompt", {1, 2}}, {"repetition_penalty", 0}}.dump(), "repetition_penalty"},
      {json{{"prompt", {1, 2}}, {"min_p", 1.5}}.dump(), "min_p"},
      {json{{"prompt", {1, 2}}, {"logit_bias", {{"abc", 1}}}}.dump(), "logit_bias"},
      {json{{"prompt", {1, 2}}, {"logit_bias", {{std::to_string(V), 1}}}}.dump(), "logit_bias"},
      {json{{"prompt", {1, 2}}, {"logit_bias", {{"5", 101}}}}.dump(), "logit_bias"},
      {json{{"prompt", {1, 2}}, {"min_tokens", 5}, {"max_tokens", 2}}.dump(), "min_tokens"},
      {json{{"prompt", {1, 2}}, {"stream_options", {{"include_usage", true}}}}.dump(), "stream_options"},
      {json{{"prompt", {1, 2}}, {"stream", "yes"}}.dump(), "stream"},
      {json{{"prompt", {1, 2}}, {"stop_token_ids", {V}}}.dump(), "stop_token_ids"},
      {json{{"prompt", {1, 2}}, {"stop", "\n"}}.dump(), "stop"},  // no tokenizer here
      {json{{"prompt", {1, 2}}, {"stop", {"a", 3}}}.dump(), "stop"},
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
  EXPECT_EQ(chat->status, 404);  // a client error, so that SDKs do not retry
  EXPECT_TRUE(json::parse(chat->body).contains("error"));
  // Without max_tokens: up to what the context leaves.
  const std::vector<int32_t> almost(static_cast<size_t>(h_->engine->max_model_len() - 2), 5);
  auto fit = post({{"prompt", almost}, {"temperature", 0}, {"ignore_eos", true}});
  ASSERT_TRUE(fit);
  ASSERT_EQ(fit->status, 200) << fit->body;
  EXPECT_EQ(json::parse(fit->body)["usage"]["completion_tokens"], 2);
  auto tok = post({{"prompt", "hi"}}, "/tokenize");
  ASSERT_TRUE(tok);
  EXPECT_EQ(tok->status, 404);  // no tokenizer here
  auto missing = client().Get("/v1/nothing");
  ASSERT_TRUE(missing);
  EXPECT_EQ(missing->status, 404);
  // The server still serves after all that.
  auto ok = post({{"prompt", {3, 4}}, {"max_tokens", 2}, {"temperature", 0}});
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200);
}

int64_t metric(const std::string& text, const std::string& series) {
  return static_cast<int64_t>(metric_value(text, series));
}

// A streaming client that goes away mid-stream aborts its request (the engine stops running
// it long before its max_tokens: it finishes as "abort", not "length"); /metrics shows it.
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
  req.body = json{{"prompt", {5, 6, 7}}, {"max_tokens", 250}, {"ignore_eos", true}, {"stream", true}}.dump();
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

// A character split across tokens is held back until it is whole (or the stream ends).
TEST(OpenAiProtocol, IncrementalTextHoldsBackSplitCharacters) {
  // Stand-in decoder: 1 -> "a", 2 -> first byte of "é" (decodes to U+FFFD alone), 2 then 3 -> "é".
  IncrementalText t([](const std::vector<int32_t>& ids) {
    std::string s;
    for (size_t i = 0; i < ids.size(); ++i) {
      if (ids[i] == 1) s += "a";
      if (ids[i] == 2) s += (i + 1 < ids.size() && ids[i + 1] == 3) ? "\xC3\xA9" : "\xEF\xBF\xBD";
    }
    return s;
  });
  EXPECT_EQ(t.add({1}, false), "a");
  EXPECT_EQ(t.add({2}, false), "");
  EXPECT_EQ(t.add({3}, false), "\xC3\xA9");
  EXPECT_EQ(t.add({1, 2}, true), "a\xEF\xBF\xBD");  // the end: the lone byte is what it is
}

// Stop strings: text that may start a stop string waits for the next piece; a match ends the
// text before it (or after it, when kept); at the end what was held comes out.
TEST(TextStream, StopStringsHoldBackAPossiblePrefix) {
  StopStrings s({"END", "xyz"}, false);
  EXPECT_EQ(s.add("abcE", false).text, "abc");
  EXPECT_EQ(s.add("N", false).text, "");
  const auto r = s.add("Dmore", false);
  EXPECT_TRUE(r.matched);
  EXPECT_EQ(r.text, "");
  EXPECT_TRUE(s.add("more", false).text.empty());  // nothing after a match
  StopStrings t({"END", "xyz"}, false);
  EXPECT_EQ(t.add("abE", false).text, "ab");
  EXPECT_EQ(t.add("x", false).text, "E");  // "E" cannot start a match any more; "x" can
  const auto end = t.add("", true);
  EXPECT_FALSE(end.matched);
  EXPECT_EQ(end.text, "x");
  StopStrings keep({"END"}, true);
  EXPECT_EQ(keep.add("abEN", false).text, "ab");
  EXPECT_EQ(keep.add("Dzz", false).text, "END");
  StopStrings first({"cd", "bcd"}, false);  // the earliest match wins
  EXPECT_EQ(first.add("abcde", false).text, "a");
}

// Request parsing alone: a string prompt goes through the tokenizer when there is one; defaults.
TEST(OpenAiProtocol, ParsesPromptsAndDefaults) {
  const EncodeFn enc = [](const std::string& s, bool) {
    std::vector<int32_t> v;
    for (char ch : s) v.push_back(static_cast<unsigned char>(ch));
    return v;
  };
  CompletionRequest r = parse_completion_request(R"({"prompt": "AB"})", enc);
  ASSERT_EQ(r.prompts.size(), 1u);
  EXPECT_EQ(r.prompts[0], (std::vector<int32_t>{65, 66}));
  EXPECT_TRUE(r.text_prompt);
  EXPECT_FALSE(r.max_tokens.has_value());
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
