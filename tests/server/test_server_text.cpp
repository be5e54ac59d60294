// The server with a tokenizer (a stand-in: ASCII bytes <-> ids 0..127, other ids decode as
// "<id>"; the real one plugs into the same ServerOptions encode/decode): string prompts are
// encoded, responses carry the decoded text (whole and streamed chunk by chunk, adding up to the
// decoding of all tokens), /tokenize and /detokenize answer.
#include <gtest/gtest.h>

#include "server_harness.h"

namespace dsa::server {
namespace {

using json = nlohmann::json;
using namespace dsa::server::test;

std::vector<int32_t> encode(const std::string& s, bool = true) {
  std::vector<int32_t> v;
  for (char c : s) v.push_back(static_cast<unsigned char>(c) & 0x7f);
  return v;
}

std::string decode(const std::vector<int32_t>& ids, bool = true) {
  std::string s;
  for (int32_t t : ids) {
    if (t < 128) {
      s.push_back(static_cast<char>(t));
    } else {
      s.append("<").append(std::to_string(t)).append(">");
    }
  }
  return s;
}

class TextServerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    ServerOptions so;
    so.encode = encode;
    so.decode = decode;
    h_ = new Harness(so);
  }
  static void TearDownTestSuite() {
    delete h_;
    h_ = nullptr;
  }
  static inline Harness* h_ = nullptr;
};

TEST_F(TextServerTest, StringPromptsAndText) {
  const std::string prompt = "The quick brown fox";
  engine::SamplingParams p;
  p.max_tokens = 8;
  p.ignore_eos = true;
  const auto want = h_->reference({encode(prompt)}, {p})[0].tokens;
  ASSERT_EQ(want.size(), 8u);

  auto r = h_->post({{"prompt", prompt}, {"max_tokens", 8}, {"temperature", 0}, {"ignore_eos", true}});
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  const json j = json::parse(r->body);
  EXPECT_EQ(j["choices"][0]["token_ids"].get<std::vector<int32_t>>(), want);
  EXPECT_EQ(j["choices"][0]["text"], decode(want));
  EXPECT_EQ(j["usage"]["prompt_tokens"], prompt.size());

  auto s = h_->post({{"prompt", prompt}, {"max_tokens", 8}, {"temperature", 0}, {"ignore_eos", true}, {"stream", true}});
  ASSERT_TRUE(s);
  ASSERT_EQ(s->status, 200) << s->body;
  std::string text;
  std::vector<int32_t> ids;
  const auto data = sse_data(s->body);
  ASSERT_FALSE(data.empty());
  EXPECT_EQ(data.back(), "[DONE]");
  for (size_t i = 0; i + 1 < data.size(); ++i) {
    const json c = json::parse(data[i]);
    text += c["choices"][0]["text"].get<std::string>();
    for (int32_t t : c["choices"][0]["token_ids"].get<std::vector<int32_t>>()) ids.push_back(t);
  }
  EXPECT_EQ(ids, want);
  EXPECT_EQ(text, decode(want));

  // Token-id prompts get text too.
  auto t = h_->post({{"prompt", encode(prompt)}, {"max_tokens", 8}, {"temperature", 0}, {"ignore_eos", true}});
  ASSERT_TRUE(t);
  EXPECT_EQ(json::parse(t->body)["choices"][0]["text"], decode(want));
}

TEST_F(TextServerTest, TokenizeAndDetokenize) {
  auto r = h_->post({{"prompt", "abc"}}, "/tokenize");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  json j = json::parse(r->body);
  EXPECT_EQ(j["tokens"].get<std::vector<int32_t>>(), (std::vector<int32_t>{97, 98, 99}));
  EXPECT_EQ(j["count"], 3);
  EXPECT_EQ(j["max_model_len"], h_->engine->max_model_len());
  r = h_->post({{"tokens", {104, 105, 300}}}, "/detokenize");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(json::parse(r->body)["prompt"], "hi<300>");
  r = h_->post({{"tokens", {104, 100000}}}, "/detokenize");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400);
  r = h_->post({{"prompt", 5}}, "/tokenize");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400);
}

}  // namespace
}  // namespace dsa::server
