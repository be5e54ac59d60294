// Tokenizer vs Hugging Face `tokenizers`: tiny byte-level BPE tokenizers trained by
// scripts/golden/make_tokenizer_golden.py and the ids `tokenizers` gave for ~170 strings each
// (ASCII, digits, CJK, emoji, whitespace runs, code, special tokens, invalid UTF-8).
#include <unistd.h>

#include <thread>

#include "common/testing.h"
#include "dsa/tokenizer/pre_tokenizer.h"
#include "dsa/tokenizer/utf8.h"
#include "tokenizer_test_util.h"

namespace dsa::test {
namespace {

class TokenizerGolden : public ::testing::TestWithParam<std::string> {};

TEST_P(TokenizerGolden, EncodeDecodeMatchHuggingFace) {
  DSA_REQUIRE_TOKENIZER();
  auto tok = Tokenizer::load(tokenizer_data_dir(GetParam()));
  auto meta = read_json_file(tokenizer_data_dir(GetParam()) + "/cases.json");
  EXPECT_EQ(tok->vocab_size(), meta["vocab_size"].get<int64_t>());
  for (int32_t id : meta["special_ids"]) EXPECT_TRUE(tok->is_special(id)) << id;
  int n = 0, nonempty = 0;
  for (const auto& c : meta["cases"]) {
    bool is_hex = c.contains("hex");
    std::string text = is_hex ? from_hex(c["hex"]) : c["text"].get<std::string>();
    SCOPED_TRACE(is_hex ? "hex " + c["hex"].get<std::string>() : "text \"" + text + "\"");
    auto want = c["ids"].get<std::vector<int32_t>>();
    auto got = tok->encode(text);
    EXPECT_EQ(got, want);
    EXPECT_EQ(tok->encode(text, true), c["ids_special"].get<std::vector<int32_t>>());
    EXPECT_EQ(tok->decode(want), c["decoded"].get<std::string>());
    EXPECT_EQ(tok->decode(c["ids_special"].get<std::vector<int32_t>>(), true), c["decoded_skip"].get<std::string>());
    // Byte-level BPE round-trips valid text unless the pre-tokenizer drops or adds characters
    // (misc: Split "Removed", ByteLevel add_prefix_space).
    if (!is_hex && GetParam() != "misc") {
      EXPECT_EQ(tok->decode(got), text);
    }  // byte-level BPE round-trips valid text
    ++n;
    nonempty += !want.empty();
  }
  EXPECT_GT(n, 100);
  EXPECT_GT(nonempty, 100);
}

// The pre-tokenizer alone: its pieces of every test text equal those of `tokenizers`
// (pre_tokenize_str), which is stricter than equal ids (different cuts can merge alike).
TEST_P(TokenizerGolden, PreTokenizerPiecesMatchHuggingFace) {
  DSA_REQUIRE_TOKENIZER();
  auto j = read_json_file(tokenizer_data_dir(GetParam()) + "/tokenizer.json");
  auto pre = tok::make_pre_tokenizer(j["pre_tokenizer"], "pre_tokenizer");
  ASSERT_TRUE(pre);
  auto meta = read_json_file(tokenizer_data_dir(GetParam()) + "/cases.json");
  int n = 0;
  for (const auto& c : meta["cases"]) {
    std::string text = c.contains("hex") ? tok::utf8_lossy(from_hex(c["hex"])) : c["text"].get<std::string>();
    std::vector<std::string> pieces{text};
    pre->apply(pieces);
    EXPECT_EQ(pieces, c["pieces"].get<std::vector<std::string>>()) << "text \"" << text << "\"";
    n += pieces.size() > 1;
  }
  EXPECT_GT(n, 50);
}

INSTANTIATE_TEST_SUITE_P(All, TokenizerGolden, ::testing::Values("deepseek_v3", "glm5", "misc"));

// The same model with merges in the older "a b" string form must give the same ids.
TEST(Tokenizer, MergesAsStringsEqualPairs) {
  DSA_REQUIRE_TOKENIZER();
  auto j = read_json_file(tokenizer_data_dir("glm5") + "/tokenizer.json");
  nlohmann::json merges = nlohmann::json::array();
  for (const auto& m : j["model"]["merges"]) merges.push_back(m[0].get<std::string>() + " " + m[1].get<std::string>());
  j["model"]["merges"] = merges;
  TempDir dir;
  auto path = dir.write("tokenizer.json", j.dump());
  auto a = Tokenizer::load(path);
  auto b = Tokenizer::load(tokenizer_data_dir("glm5"));
  for (std::string s : {"Hello world, 1234567!", "你好 世界", "  code(x) += 3;\n\n", "[gMASK]<sop>hi"})
    EXPECT_EQ(a->encode(s), b->encode(s)) << s;
}

TEST(Tokenizer, SpecialIdsAndConfigs) {
  DSA_REQUIRE_TOKENIZER();
  auto ds = Tokenizer::load(tokenizer_data_dir("deepseek_v3"));
  int32_t bos = ds->token_id("<｜begin▁of▁sentence｜>");
  int32_t eos = ds->token_id("<｜end▁of▁sentence｜>");
  ASSERT_GE(bos, 0);
  ASSERT_GE(eos, 0);
  EXPECT_EQ(ds->bos_id(), bos);  // tokenizer_config.json: object form
  EXPECT_EQ(ds->eos_id(), eos);  // tokenizer_config.json: string form
  EXPECT_TRUE(ds->is_special(bos));
  EXPECT_EQ(ds->token(bos), "<｜begin▁of▁sentence｜>");
  EXPECT_EQ(ds->token_id("no such token"), -1);
  EXPECT_EQ(ds->token(-1), std::nullopt);
  EXPECT_EQ(ds->token(static_cast<int32_t>(ds->vocab_size())), std::nullopt);
  // add_bos_token: true and a post-processor that adds nothing: BOS prepended, as transformers does.
  auto ids = ds->encode("hi", true);
  ASSERT_FALSE(ids.empty());
  EXPECT_EQ(ids[0], bos);
  EXPECT_EQ(std::vector<int32_t>(ids.begin() + 1, ids.end()), ds->encode("hi"));
  EXPECT_EQ(ds->encode("<｜User｜>hi<｜Assistant｜>"),
            (std::vector<int32_t>{ds->token_id("<｜User｜>"), ds->encode("hi")[0], ds->token_id("<｜Assistant｜>")}));

  auto glm = Tokenizer::load(tokenizer_data_dir("glm5"));
  EXPECT_EQ(glm->bos_id(), std::nullopt);
  EXPECT_EQ(glm->eos_id(), glm->token_id("<|endoftext|>"));  // generation_config.json: first of the list
  EXPECT_EQ(glm->encode("[gMASK]<sop>"), (std::vector<int32_t>{glm->token_id("[gMASK]"), glm->token_id("<sop>")}));
  EXPECT_EQ(glm->encode("hi", true), glm->encode("hi"));  // no post-processor, no add_bos_token
}

class TokenizerBytes : public ::testing::TestWithParam<std::string> {};

TEST_P(TokenizerBytes, EmptyAndInvalidUtf8) {
  DSA_REQUIRE_TOKENIZER();
  auto tok = Tokenizer::load(tokenizer_data_dir(GetParam()));
  EXPECT_TRUE(tok->encode("").empty());
  EXPECT_EQ(tok->decode({}), "");
  // Invalid bytes become U+FFFD (maximal subparts), whatever the position.
  EXPECT_EQ(tok->encode(std::string("a\xff" "b")), tok->encode("a\xEF\xBF\xBD" "b"));
  EXPECT_EQ(tok->encode(std::string("\xe4\xbd")), tok->encode("\xEF\xBF\xBD"));
  EXPECT_EQ(tok->encode(std::string("\xc0\xaf")), tok->encode("\xEF\xBF\xBD\xEF\xBF\xBD"));
  std::string with_nul("a\0b", 3);
  EXPECT_EQ(tok->decode(tok->encode(with_nul)), with_nul);
  // Every byte string round-trips to its lossy UTF-8 form (random fuzz, seeded).
  Rng rng;
  for (int it = 0; it < 200; ++it) {
    std::string s(static_cast<size_t>(rng.randint(0, 40)), '\0');
    for (auto& ch : s) ch = static_cast<char>(rng.randint(0, 255));
    auto ids = tok->encode(s);
    std::string back = tok->decode(ids);
    EXPECT_EQ(tok->encode(back), ids);
  }
}

// encode/decode from several threads at once (the per-piece cache is shared) give the
// single-threaded results.
TEST(Tokenizer, ConcurrentEncodeMatchesSerial) {
  DSA_REQUIRE_TOKENIZER();
  auto tok = Tokenizer::load(tokenizer_data_dir("deepseek_v3"));
  auto meta = read_json_file(tokenizer_data_dir("deepseek_v3") + "/cases.json");
  std::vector<std::string> texts;
  std::vector<std::vector<int32_t>> want;
  for (const auto& c : meta["cases"])
    if (c.contains("text")) texts.push_back(c["text"]), want.push_back(c["ids"].get<std::vector<int32_t>>());
  std::vector<int> bad(4, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (int rep = 0; rep < 5; ++rep)
        for (size_t i = 0; i < texts.size(); ++i) {
          size_t k = (i * 7 + static_cast<size_t>(t) * 13 + static_cast<size_t>(rep)) % texts.size();
          if (tok->encode(texts[k]) != want[k] || tok->decode(want[k]) != texts[k]) ++bad[t];
        }
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(bad, std::vector<int>(4, 0));
}

INSTANTIATE_TEST_SUITE_P(RoundTrip, TokenizerBytes, ::testing::Values("deepseek_v3", "glm5"));

TEST(Tokenizer, DecodeSkipsIdsWithoutToken) {
  DSA_REQUIRE_TOKENIZER();
  auto tok = Tokenizer::load(tokenizer_data_dir("glm5"));
  const int32_t n = static_cast<int32_t>(tok->vocab_size());
  // A padded model vocabulary produces ids past the tokenizer's: they decode to nothing (as in
  // `tokenizers`), never an exception (a streaming server decodes outside any handler).
  const int32_t a = tok->token_id("a");
  ASSERT_GE(a, 0);
  EXPECT_EQ(tok->decode({a, n, a}), tok->decode({a, a}));
  EXPECT_EQ(tok->decode({-1, n, n + 1000, INT32_MAX, INT32_MIN}), "");
  EXPECT_EQ(tok->decode({n}, /*skip_special_tokens=*/true), "");
  EXPECT_FALSE(tok->token(n).has_value());
  // Decoding a partial UTF-8 character gives U+FFFD (as `tokenizers` does), not invalid bytes.
  // 0xE4 (stand-in U+00E4 'ä') is the first byte of a 3-byte character.
  int32_t e4 = tok->token_id("\xC3\xA4");
  ASSERT_GE(e4, 0);
  EXPECT_EQ(tok->decode({e4}), "\xEF\xBF\xBD");
  EXPECT_EQ(tok->decode({e4, tok->token_id("a")}), "\xEF\xBF\xBD" "a");
}

}  // namespace
}  // namespace dsa::test
