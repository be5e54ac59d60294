// A real Tokenizer with fewer ids than the model's vocabulary (checkpoints pad vocab_size):
// generated ids without a token used to make Tokenizer::decode throw inside the streaming content
// provider, which std::terminate'd the whole server. They decode to nothing now (tokenizer.h);
// over loopback, streamed and whole responses carry every token id, the text of the decodable
// ones, and the server keeps answering.
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "dsa/tokenizer/tokenizer.h"
#include "server_harness.h"

namespace dsa::server {
namespace {

using json = nlohmann::json;
using namespace dsa::server::test;

// Byte-level BPE with 6 ids: "a" "b" "c" "ab" "<s>" " " (the model has 512).
std::shared_ptr<Tokenizer> small_tokenizer() {
  const auto path = std::filesystem::temp_directory_path() / ("dsa_padded_vocab_" + std::to_string(::getpid()) + ".json");
  std::ofstream(path) << R"({"added_tokens": [{"id": 4, "content": "<s>", "special": true}],
    "normalizer": null, "post_processor": null,
    "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false, "use_regex": false},
    "decoder": {"type": "ByteLevel"},
    "model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "c": 2, "ab": 3, "\u0120": 5}, "merges": [["a", "b"]]}})";
  std::shared_ptr<Tokenizer> tok = Tokenizer::load(path.string());
  std::filesystem::remove(path);
  return tok;
}

TEST(PaddedVocabServer, IdsWithoutTokenNeverBreakTheServer) {
  if (!tokenizer_available()) GTEST_SKIP() << "built without PCRE2: no tokenizer";
  const std::shared_ptr<Tokenizer> tok = small_tokenizer();
  ASSERT_EQ(tok->vocab_size(), 6);
  ServerOptions so;
  so.encode = [tok](const std::string& s, bool special) { return tok->encode(s, special); };
  so.decode = [tok](const std::vector<int32_t>& ids, bool skip) { return tok->decode(ids, skip); };
  Harness h(so);
  // Sampled tokens over the tiny model's 512 ids: almost all have no token.
  const json req = {{"prompt", {2, 3, 5, 0, 1, 3}}, {"max_tokens", 12}, {"temperature", 1.0}, {"seed", 3},
                    {"ignore_eos", true}};
  for (int round = 0; round < 3; ++round) {
    json sreq = req;
    sreq["stream"] = true;
    auto s = h.post(sreq);
    ASSERT_TRUE(s) << "the server died (round " << round << ")";
    ASSERT_EQ(s->status, 200) << s->body;
    const auto data = sse_data(s->body);
    ASSERT_FALSE(data.empty());
    EXPECT_EQ(data.back(), "[DONE]");
    std::vector<int32_t> ids;
    std::string text;
    for (size_t i = 0; i + 1 < data.size(); ++i) {
      const json c = json::parse(data[i]);
      text += c["choices"][0]["text"].get<std::string>();
      for (int32_t t : c["choices"][0]["token_ids"].get<std::vector<int32_t>>()) ids.push_back(t);
    }
    ASSERT_EQ(ids.size(), 12u);
    int64_t without_token = 0;
    for (int32_t t : ids) without_token += t >= tok->vocab_size();
    EXPECT_GT(without_token, 0) << "the test needs ids the tokenizer lacks";
    EXPECT_EQ(text, tok->decode(ids, true));

    auto r = h.post(req);  // whole response
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 200) << r->body;
    const json j = json::parse(r->body);
    EXPECT_EQ(j["choices"][0]["token_ids"].get<std::vector<int32_t>>(), ids);  // same seed
    EXPECT_EQ(j["choices"][0]["text"], text);
  }
  auto d = h.post({{"tokens", {0, 1, 300, 511}}}, "/detokenize");
  ASSERT_TRUE(d);
  EXPECT_EQ(d->status, 200) << d->body;
  EXPECT_EQ(json::parse(d->body)["prompt"], "ab");
  auto health = h.client().Get("/health");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
}

}  // namespace
}  // namespace dsa::server
