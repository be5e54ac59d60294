// /v1/completions fields against the engine's own results and the CPU reference logits, on the
// tiny GLM checkpoint with the test tokenizer (byte-level BPE, BOS <s> = 0): list prompts
// (strings and token ids, choice index = prompt * n + choice), n with derived seeds, best_of,
// stop strings split across tokens (whole and streamed: never emitted, held back while they may
// still match), logprobs and echo (log-softmax of the reference logits), max_tokens 0 with echo,
// penalties / logit_bias / min_p / min_tokens passed to the engine, add_special_tokens.
#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "server_harness.h"

namespace dsa::server {
namespace {

using json = nlohmann::json;
using namespace dsa::server::test;

class CompletionsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!test_tokenizer()) return;
    ServerOptions so;
    so.model_name = "tiny";
    HarnessOptions ho;
    ho.tokenizer = true;
    h_ = new Harness(so, ho);
  }
  static void TearDownTestSuite() {
    delete h_;
    h_ = nullptr;
  }
  void SetUp() override {
    if (!h_) GTEST_SKIP() << "the test tokenizer cannot be loaded in this build (no PCRE2)";
  }
  static std::vector<int32_t> enc(const std::string& s, bool special = true) { return h_->tok->encode(s, special); }
  static std::string dec(const std::vector<int32_t>& ids) { return h_->tok->decode(ids, true); }
  static json ok(const json& body) {
    auto r = h_->post(body);
    EXPECT_TRUE(r);
    if (!r) return {};
    EXPECT_EQ(r->status, 200) << body.dump() << " -> " << r->body;
    return json::parse(r->body, nullptr, false);
  }
  // Streams and returns the chunks (the [DONE] checked and dropped).
  static std::vector<json> stream(json body) {
    body["stream"] = true;
    auto r = h_->post(body);
    EXPECT_TRUE(r);
    if (!r) return {};
    EXPECT_EQ(r->status, 200) << r->body;
    std::vector<json> out;
    const auto data = sse_data(r->body);
    EXPECT_FALSE(data.empty());
    if (data.empty()) return out;
    EXPECT_EQ(data.back(), "[DONE]");
    for (size_t i = 0; i + 1 < data.size(); ++i) out.push_back(json::parse(data[i]));
    return out;
  }
  static engine::SamplingParams greedy(int64_t n) {
    engine::SamplingParams p;
    p.max_tokens = n;
    p.ignore_eos = true;
    return p;
  }
  static inline Harness* h_ = nullptr;
};

TEST_F(CompletionsTest, ListPromptsStringsAndIdsWithChoiceIndexes) {
  const std::vector<std::string> texts{"Hello world", "The weather is"};
  const auto want = h_->reference({enc(texts[0]), enc(texts[1])}, {greedy(4)});
  const json j = ok({{"prompt", texts}, {"max_tokens", 4}, {"temperature", 0}, {"ignore_eos", true}});
  ASSERT_EQ(j["choices"].size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    const json& c = j["choices"][i];
    EXPECT_EQ(c["index"], i);
    EXPECT_EQ(c["token_ids"].get<std::vector<int32_t>>(), want[i].tokens);
    EXPECT_EQ(c["text"], dec(want[i].tokens));
  }
  EXPECT_EQ(j["usage"]["prompt_tokens"], enc(texts[0]).size() + enc(texts[1]).size());
  EXPECT_EQ(j["usage"]["completion_tokens"], 8);
  // Token-id lists (what lm-eval-harness sends); one prompt as [[ids]].
  const json k = ok({{"prompt", {enc(texts[1]), enc(texts[0])}}, {"max_tokens", 4}, {"temperature", 0}, {"ignore_eos", true}});
  ASSERT_EQ(k["choices"].size(), 2u);
  EXPECT_EQ(k["choices"][0]["token_ids"].get<std::vector<int32_t>>(), want[1].tokens);
  EXPECT_EQ(k["choices"][1]["token_ids"].get<std::vector<int32_t>>(), want[0].tokens);
  const json one = ok({{"prompt", {enc(texts[0])}}, {"max_tokens", 4}, {"temperature", 0}, {"ignore_eos", true}});
  ASSERT_EQ(one["choices"].size(), 1u);
  EXPECT_EQ(one["choices"][0]["token_ids"].get<std::vector<int32_t>>(), want[0].tokens);
}

TEST_F(CompletionsTest, NChoicesUseDerivedSeedsAndBestOfPicksTheLikeliest) {
  const auto p = enc("Numbers like");
  std::vector<engine::SamplingParams> ps;
  for (uint64_t s = 0; s < 3; ++s) {
    engine::SamplingParams q = greedy(6);
    q.temperature = 1.0;
    q.seed = 100 + s;
    ps.push_back(q);
  }
  const auto want = h_->reference({p, p, p}, ps);
  const json body = {{"prompt", "Numbers like"}, {"max_tokens", 6}, {"n", 3}, {"seed", 100}, {"ignore_eos", true}};
  const json j = ok(body);
  ASSERT_EQ(j["choices"].size(), 3u);
  std::set<std::vector<int32_t>> distinct;
  for (size_t c = 0; c < 3; ++c) {
    EXPECT_EQ(j["choices"][c]["index"], c);
    EXPECT_EQ(j["choices"][c]["token_ids"].get<std::vector<int32_t>>(), want[c].tokens) << c;
    distinct.insert(want[c].tokens);
  }
  EXPECT_GT(distinct.size(), 1u) << "derived seeds should differ";
  EXPECT_EQ(j["usage"]["completion_tokens"], 18);
  // Two prompts x n = 2: index = prompt * n + choice.
  const json two = ok({{"prompt", {"Numbers like", "Numbers like"}}, {"max_tokens", 6}, {"n", 2}, {"seed", 100},
                       {"ignore_eos", true}});
  ASSERT_EQ(two["choices"].size(), 4u);
  for (size_t c = 0; c < 4; ++c) {
    EXPECT_EQ(two["choices"][c]["index"], c);
    EXPECT_EQ(two["choices"][c]["token_ids"].get<std::vector<int32_t>>(), want[c % 2].tokens);
  }
  // best_of 3, n 1: the candidate of highest summed logprob among the three seeds.
  const json b = ok({{"prompt", "Numbers like"}, {"max_tokens", 6}, {"best_of", 3}, {"seed", 100}, {"ignore_eos", true},
                     {"logprobs", 0}});
  ASSERT_EQ(b["choices"].size(), 1u);
  double best = -INFINITY;
  std::vector<int32_t> best_tokens;
  const json all = ok({{"prompt", "Numbers like"}, {"max_tokens", 6}, {"n", 3}, {"seed", 100}, {"ignore_eos", true},
                       {"logprobs", 0}});
  for (const json& c : all["choices"]) {
    double s = 0;
    for (const json& lp : c["logprobs"]["token_logprobs"]) s += lp.get<double>();
    if (s > best) {
      best = s;
      best_tokens = c["token_ids"].get<std::vector<int32_t>>();
    }
  }
  EXPECT_EQ(b["choices"][0]["token_ids"].get<std::vector<int32_t>>(), best_tokens);
}

// A stop string that straddles a token boundary of the greedy output: the text ends right
// before its first occurrence, whole and streamed, and no chunk ever carries any of it.
TEST_F(CompletionsTest, StopStringsAcrossTokensWholeAndStreamed) {
  const std::string prompt = "The quick brown fox";
  const auto toks = h_->reference({enc(prompt)}, {greedy(24)})[0].tokens;
  const std::string full = dec(toks);
  std::string stop;
  for (size_t i = 3; i + 2 < toks.size() && stop.empty(); ++i) {
    const std::string a = dec(std::vector<int32_t>(toks.begin(), toks.begin() + static_cast<long>(i)));
    const std::string b = dec(std::vector<int32_t>(toks.begin(), toks.begin() + static_cast<long>(i) + 1));
    if (a.size() < 3 || b.size() < a.size() + 2 || b.compare(0, a.size(), a) != 0) continue;
    const std::string cand = b.substr(a.size() - 2, 4);  // 2 bytes of one token, 2 of the next
    if (std::all_of(cand.begin(), cand.end(), [](char c) { return c >= 0x21 && c < 0x7f; })) stop = cand;
  }
  ASSERT_FALSE(stop.empty()) << "no ASCII token boundary in: " << full;
  const size_t at = full.find(stop);
  const std::string want = full.substr(0, at);
  const json body = {{"prompt", prompt}, {"max_tokens", 24}, {"temperature", 0}, {"ignore_eos", true},
                     {"stop", {"\x01never", stop}}};
  const json j = ok(body);
  EXPECT_EQ(j["choices"][0]["text"], want) << "stop " << stop;
  EXPECT_EQ(j["choices"][0]["finish_reason"], "stop");
  EXPECT_LT(j["usage"]["completion_tokens"].get<int64_t>(), 24);
  std::string streamed;
  std::string finish;
  for (const json& c : stream(body)) {
    const std::string t = c["choices"][0]["text"];
    streamed += t;
    EXPECT_LE(streamed.size(), want.size()) << "a chunk went past the stop string: " << streamed;
    if (!c["choices"][0]["finish_reason"].is_null()) finish = c["choices"][0]["finish_reason"];
  }
  EXPECT_EQ(streamed, want);
  EXPECT_EQ(finish, "stop");
  // include_stop_str_in_output keeps it; a stop string that never occurs changes nothing.
  json inc = body;
  inc["include_stop_str_in_output"] = true;
  EXPECT_EQ(ok(inc)["choices"][0]["text"], full.substr(0, at + stop.size()));
  json none = body;
  none["stop"] = "\x02\x03";
  const json n = ok(none);
  EXPECT_EQ(n["choices"][0]["text"], full);
  EXPECT_EQ(n["choices"][0]["finish_reason"], "length");
}

TEST_F(CompletionsTest, LogprobsAndEchoAreTheLogSoftmaxOfTheReferenceLogits) {
  const std::vector<int32_t> prompt = enc("Hello again");
  const auto gen = h_->reference({prompt}, {greedy(4)})[0].tokens;
  std::vector<int32_t> all = prompt;
  all.insert(all.end(), gen.begin(), gen.end() - 1);
  const std::vector<float> logits = h_->reference_logits(all);
  const int64_t V = h_->lm->config().vocab_size;
  auto logprob = [&](size_t row, int32_t tok) {
    const float* r = logits.data() + row * static_cast<size_t>(V);
    double mx = -INFINITY, s = 0;
    for (int64_t i = 0; i < V; ++i) mx = std::max(mx, static_cast<double>(r[i]));
    for (int64_t i = 0; i < V; ++i) s += std::exp(r[i] - mx);
    return static_cast<double>(r[tok]) - mx - std::log(s);
  };
  const json j = ok({{"prompt", prompt}, {"max_tokens", 4}, {"temperature", 0}, {"ignore_eos", true}, {"logprobs", 3},
                     {"echo", true}});
  const json& c = j["choices"][0];
  EXPECT_EQ(c["text"], dec(prompt) + dec(gen));
  const json& lp = c["logprobs"];
  ASSERT_EQ(lp["tokens"].size(), prompt.size() + gen.size());
  ASSERT_EQ(lp["token_logprobs"].size(), prompt.size() + gen.size());
  EXPECT_TRUE(lp["token_logprobs"][0].is_null());
  EXPECT_TRUE(lp["top_logprobs"][0].is_null());
  for (size_t t = 1; t < all.size() + 1; ++t) {
    const int32_t tok = t < prompt.size() ? prompt[t] : gen[t - prompt.size()];
    EXPECT_NEAR(lp["token_logprobs"][t].get<double>(), logprob(t - 1, tok), 2e-4) << "position " << t;
    const json& top = lp["top_logprobs"][t];
    ASSERT_TRUE(top.is_object());
    EXPECT_GE(top.size(), 1u);
    EXPECT_LE(top.size(), 4u);  // 3 alternatives + the chosen token
    for (const auto& [k, v] : top.items()) EXPECT_LE(v.get<double>(), 1e-6);
  }
  // text_offset: where each token's text starts.
  size_t off = 0;
  for (size_t t = 0; t < lp["tokens"].size(); ++t) {
    EXPECT_EQ(lp["text_offset"][t], off);
    off += lp["tokens"][t].get<std::string>().size();
  }
  // Greedy: each generated token is the most likely.
  for (size_t t = prompt.size(); t < lp["tokens"].size(); ++t) {
    double mx = -INFINITY;
    for (const auto& [k, v] : lp["top_logprobs"][t].items()) mx = std::max(mx, v.get<double>());
    EXPECT_NEAR(mx, lp["token_logprobs"][t].get<double>(), 1e-6);
  }
  // max_tokens 0 with echo: the prompt scored, nothing generated (lm-eval loglikelihood).
  const json s = ok({{"prompt", prompt}, {"max_tokens", 0}, {"echo", true}, {"logprobs", 1}});
  EXPECT_EQ(s["choices"][0]["text"], dec(prompt));
  EXPECT_EQ(s["choices"][0]["logprobs"]["tokens"].size(), prompt.size());
  EXPECT_EQ(s["usage"]["completion_tokens"], 0);
  EXPECT_NEAR(s["choices"][0]["logprobs"]["token_logprobs"][1].get<double>(), logprob(0, prompt[1]), 2e-4);
  // Streamed: the same logprobs, the echo in the first chunk.
  std::vector<double> streamed;
  std::vector<size_t> offsets;
  std::string text;
  for (const json& ch : stream({{"prompt", prompt}, {"max_tokens", 4}, {"temperature", 0}, {"ignore_eos", true},
                                {"logprobs", 3}, {"echo", true}})) {
    text += ch["choices"][0]["text"].get<std::string>();
    for (const json& v : ch["choices"][0]["logprobs"]["token_logprobs"]) streamed.push_back(v.is_null() ? 1.0 : v.get<double>());
    for (const json& v : ch["choices"][0]["logprobs"]["text_offset"]) offsets.push_back(v.get<size_t>());
  }
  EXPECT_EQ(offsets, lp["text_offset"].get<std::vector<size_t>>());
  EXPECT_EQ(text, dec(prompt) + dec(gen));
  ASSERT_EQ(streamed.size(), prompt.size() + gen.size());
  for (size_t t = 0; t < streamed.size(); ++t) EXPECT_NEAR(streamed[t], t == 0 ? 1.0 : lp["token_logprobs"][t].get<double>(), 1e-6);
}

// Penalties, logit_bias, min_p and min_tokens reach the engine (whose sampler is checked
// against a reference loop in tests/engine): the server's tokens equal the engine's.
TEST_F(CompletionsTest, SamplingFieldsReachTheEngine) {
  const auto p = enc("what is the answer");
  engine::SamplingParams q;
  q.max_tokens = 10;
  q.temperature = 0.8;
  q.seed = 7;
  q.min_p = 0.05;
  q.presence_penalty = 0.5;
  q.frequency_penalty = 0.7;
  q.repetition_penalty = 1.3;
  q.logit_bias = {{300, 5.0f}, {301, -100.f}};
  q.min_tokens = 6;
  const auto want = h_->reference({p}, {q})[0];
  const json j = ok({{"prompt", "what is the answer"}, {"max_tokens", 10}, {"temperature", 0.8}, {"seed", 7},
                     {"min_p", 0.05}, {"presence_penalty", 0.5}, {"frequency_penalty", 0.7},
                     {"repetition_penalty", 1.3}, {"logit_bias", {{"300", 5.0}, {"301", -100}}}, {"min_tokens", 6}});
  EXPECT_EQ(j["choices"][0]["token_ids"].get<std::vector<int32_t>>(), want.tokens);
  EXPECT_GE(want.tokens.size(), 6u);
  // A bias of +100 makes that token certain.
  const json forced = ok({{"prompt", "what is"}, {"max_tokens", 3}, {"logit_bias", {{"77", 100}}}, {"ignore_eos", true}});
  EXPECT_EQ(forced["choices"][0]["token_ids"].get<std::vector<int32_t>>(), (std::vector<int32_t>{77, 77, 77}));
}

// A client that applied a template itself (BOS included) sends add_special_tokens: false.
TEST_F(CompletionsTest, AddSpecialTokensFalseGivesNoSecondBos) {
  const json with = ok({{"prompt", "<s>Hello"}, {"max_tokens", 1}, {"echo", true}, {"logprobs", 0}});
  const json without = ok({{"prompt", "<s>Hello"}, {"max_tokens", 1}, {"add_special_tokens", false}, {"echo", true},
                           {"logprobs", 0}});
  const size_t n = enc("Hello", false).size();
  EXPECT_EQ(with["usage"]["prompt_tokens"], n + 2);     // <s> <s> Hello
  EXPECT_EQ(without["usage"]["prompt_tokens"], n + 1);  // <s> Hello
  EXPECT_EQ(without["choices"][0]["logprobs"]["tokens"][0], "<s>");
  EXPECT_NE(without["choices"][0]["logprobs"]["tokens"][1], "<s>");
  // /tokenize takes the same switch.
  auto t = h_->post({{"prompt", "Hello"}, {"add_special_tokens", false}}, "/tokenize");
  ASSERT_TRUE(t);
  EXPECT_EQ(json::parse(t->body)["tokens"].get<std::vector<int32_t>>(), enc("Hello", false));
}

}  // namespace
}  // namespace dsa::server
