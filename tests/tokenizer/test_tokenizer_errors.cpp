// Malformed tokenizer files: each gives a dsa::Error naming the field (and the file).
#include <sys/stat.h>

#include <functional>

#include "common/testing.h"
#include "tokenizer_test_util.h"

namespace dsa::test {
namespace {

// A minimal valid byte-level BPE tokenizer.json, edited per case.
nlohmann::json minimal() {
  return nlohmann::json::parse(R"({
    "version": "1.0", "truncation": null, "padding": null,
    "added_tokens": [{"id": 4, "content": "<s>", "special": true, "normalized": false,
                      "lstrip": false, "rstrip": false, "single_word": false}],
    "normalizer": null,
    "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
      {"type": "Split", "pattern": {"Regex": "\\p{N}{1,3}"}, "behavior": "Isolated", "invert": false},
      {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": false}]},
    "post_processor": null,
    "decoder": {"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": true, "use_regex": true},
    "model": {"type": "BPE", "dropout": null, "unk_token": null, "continuing_subword_prefix": null,
              "end_of_word_suffix": null, "fuse_unk": false, "byte_fallback": false, "ignore_merges": false,
              "vocab": {"a": 0, "b": 1, "ab": 2, "c": 3}, "merges": [["a", "b"]]}
  })");
}

std::string load_error(const nlohmann::json& j) {
  TempDir dir;
  auto path = dir.write("tokenizer.json", j.dump());
  return error_of([&] { Tokenizer::load(path); });
}

void expect_error(const std::function<void(nlohmann::json&)>& edit, const std::string& part) {
  auto j = minimal();
  edit(j);
  std::string e = load_error(j);
  EXPECT_NE(e.find(part), std::string::npos) << "error: " << e << "\nexpected to contain: " << part;
  EXPECT_NE(e.find("tokenizer.json"), std::string::npos) << e;
}

TEST(TokenizerErrors, MinimalLoadsAndEncodes) {
  DSA_REQUIRE_TOKENIZER();
  TempDir dir;
  auto tok = Tokenizer::load(dir.write("tokenizer.json", minimal().dump()));
  EXPECT_EQ(tok->encode("abca<s>b"), (std::vector<int32_t>{2, 3, 0, 4, 1}));
  EXPECT_EQ(tok->encode("xa"), (std::vector<int32_t>{0}));  // no unk token: unknown characters dropped, as HF
  EXPECT_EQ(tok->decode({2, 4, 3}), "ab<s>c");
  EXPECT_EQ(tok->decode({2, 4, 3}, true), "abc");
  EXPECT_EQ(tok->vocab_size(), 5);
  auto j = minimal();
  j["normalizer"] = {{"type", "Sequence"}, {"normalizers", nlohmann::json::array()}};
  EXPECT_EQ(Tokenizer::load(dir.write("t2.json", j.dump()))->encode("abc"), (std::vector<int32_t>{2, 3}));
}

TEST(TokenizerErrors, MalformedFieldsAreNamed) {
  DSA_REQUIRE_TOKENIZER();
  expect_error([](auto& j) { j["model"]["type"] = "WordPiece"; }, "model.type: unsupported model type \"WordPiece\"");
  expect_error([](auto& j) { j["model"].erase("vocab"); }, "model.vocab: missing");
  expect_error([](auto& j) { j.erase("model"); }, "model: missing");
  expect_error([](auto& j) { j["model"]["vocab"]["x"] = -3; }, "model.vocab[\"x\"]: id must be a non-negative integer");
  expect_error([](auto& j) { j["model"]["merges"] = {"ab"}; }, "model.merges[0]: bad merge \"ab\"");
  expect_error([](auto& j) { j["model"]["merges"] = {{"a", "b", "c"}}; }, "model.merges[0]: bad merge");
  expect_error([](auto& j) { j["model"]["merges"] = {"a z"}; }, "model.merges[0]: token \"z\" is not in the vocabulary");
  expect_error([](auto& j) { j["model"]["merges"] = {"b a"}; }, "model.merges[0]: merged token \"ba\" is not in the vocabulary");
  expect_error([](auto& j) { j["model"]["dropout"] = 0.1; }, "model.dropout");
  expect_error([](auto& j) { j["model"]["unk_token"] = "<unk>"; }, "model.unk_token: \"<unk>\" is not in the vocabulary");
  expect_error([](auto& j) { j["pre_tokenizer"]["pretokenizers"][0]["type"] = "Whitespace"; },
               "pre_tokenizer.pretokenizers[0]: unsupported pre-tokenizer type \"Whitespace\"");
  expect_error([](auto& j) { j["pre_tokenizer"]["pretokenizers"][0]["behavior"] = "Sideways"; },
               "pre_tokenizer.pretokenizers[0].behavior: unknown split behavior \"Sideways\"");
  expect_error([](auto& j) { j["pre_tokenizer"]["pretokenizers"][0]["pattern"] = {{"Regex", "(ab"}}; },
               "pre_tokenizer.pretokenizers[0].pattern: cannot compile regex");
  expect_error([](auto& j) { j["pre_tokenizer"]["pretokenizers"][0]["pattern"] = {{"Glob", "*"}}; },
               "pre_tokenizer.pretokenizers[0].pattern: expected");
  expect_error([](auto& j) { j["normalizer"] = {{"type", "NFKC"}}; }, "normalizer: unsupported normalizer NFKC");
  expect_error([](auto& j) { j["decoder"] = {{"type", "WordPiece"}}; }, "decoder.type: unsupported decoder type \"WordPiece\"");
  expect_error([](auto& j) { j["post_processor"] = {{"type", "RobertaProcessing"}}; },
               "post_processor: unsupported post-processor type \"RobertaProcessing\"");
  expect_error([](auto& j) { j["added_tokens"][0].erase("content"); }, "added_tokens[0].content");
  expect_error([](auto& j) { j["added_tokens"][0]["id"] = "four"; }, "added_tokens[0].id");
}

// A pattern whose match backtracks through a group per character exhausts PCRE2's JIT stack on a
// long input; the interpreter fallback must still give the whole match.
TEST(TokenizerErrors, LongMatchBeyondJitStack) {
  DSA_REQUIRE_TOKENIZER();
  auto j = minimal();
  j["pre_tokenizer"]["pretokenizers"][0]["pattern"] = {{"Regex", "(?:(a)|(b))+(?=c)"}};
  TempDir dir;
  auto tok = Tokenizer::load(dir.write("tokenizer.json", j.dump()));
  std::string text(200000, 'a');
  text += "c";
  auto ids = tok->encode(text);
  std::vector<int32_t> want(200000, 0);  // "a" (only a+b merges)
  want.push_back(3);                     // "c"
  EXPECT_EQ(ids, want);
}

TEST(TokenizerErrors, MissingAndInvalidFiles) {
  DSA_REQUIRE_TOKENIZER();
  TempDir dir;
  EXPECT_NE(error_of([&] { Tokenizer::load((dir.path / "nope.json").string()); }).find("does not exist"), std::string::npos);
  EXPECT_NE(error_of([&] { Tokenizer::load(dir.path.string()); }).find("tokenizer.json does not exist"), std::string::npos);
  auto bad = dir.write("tokenizer.json", "{\"model\": ");
  EXPECT_NE(error_of([&] { Tokenizer::load(bad); }).find("is not valid JSON"), std::string::npos);
}

// Issue 20: the files of a tokenizer are regular files (a FIFO would block the load, a symlink
// loop threw a std::filesystem exception), and ids in the file cannot size the id table beyond
// the tokens it holds.
TEST(TokenizerErrors, FifoSymlinkLoopAndHugeIds) {
  DSA_REQUIRE_TOKENIZER();
  TempDir dir;
  const auto p = dir.path / "tokenizer.json";
  ASSERT_EQ(::mkfifo(p.c_str(), 0600), 0);
  EXPECT_EQ(error_of([&] { Tokenizer::load(dir.path.string()); }),
            "tokenizer: cannot read tokenizer file " + p.string() + ": is a FIFO, not a regular file");
  std::filesystem::remove(p);
  std::filesystem::create_symlink("tokenizer.json", p);
  EXPECT_EQ(error_of([&] { Tokenizer::load(dir.path.string()); }),
            "tokenizer: " + p.string() + ": cannot access: Too many levels of symbolic links");
  std::filesystem::remove(p);
  // Companion files: a FIFO tokenizer_config.json is refused, not waited on.
  dir.write("tokenizer.json", minimal().dump());
  ASSERT_EQ(::mkfifo((dir.path / "tokenizer_config.json").c_str(), 0600), 0);
  EXPECT_NE(error_of([&] { Tokenizer::load(dir.path.string()); }).find("is a FIFO"), std::string::npos);
  std::filesystem::remove(dir.path / "tokenizer_config.json");
  EXPECT_EQ(Tokenizer::load(dir.path.string())->vocab_size(), 5);
  // A huge id in a tiny file: refused before the id table is sized by it.
  auto j = minimal();
  j["model"]["vocab"]["z"] = 2147483646;
  EXPECT_NE(load_error(j).find("largest id 2147483646 for 6 tokens"), std::string::npos) << load_error(j);
  j = minimal();
  j["added_tokens"][0]["id"] = int64_t{1} << 40;
  EXPECT_NE(load_error(j).find("added_tokens[0].id"), std::string::npos) << load_error(j);
  // Fields of an unexpected JSON type are a dsa::Error too (they were nlohmann exceptions).
  j = minimal();
  j["post_processor"] = {{"type", "TemplateProcessing"},
                         {"single", {{{"SpecialToken", {{"id", "<s>"}}}}}},
                         {"special_tokens", {{"<s>", {{"ids", {"x"}}}}}}};
  EXPECT_NE(load_error(j).find("unexpected structure"), std::string::npos) << load_error(j);
  // The text form (no companion files) loads the same tokenizer.
  EXPECT_EQ(Tokenizer::from_json_text(minimal().dump(), "text")->encode("abc"), (std::vector<int32_t>{2, 3}));
  EXPECT_NE(error_of([] { Tokenizer::from_json_text("{", "text"); }).find("text is not valid JSON"), std::string::npos);
}

TEST(TokenizerErrors, WithoutPcre2LoadSaysSo) {
  if (tokenizer_available()) GTEST_SKIP() << "built with PCRE2";
  EXPECT_NE(error_of([] { Tokenizer::load("x"); }).find("built without PCRE2"), std::string::npos);
}

}  // namespace
}  // namespace dsa::test
