// dsa's tiny-checkpoint tokenizer (tokenizer/tiny_tokenizer.h): loads, has the family's special
// tokens at the expected ids, keeps extra pieces whole, fits the model's vocabulary and round
// trips text. (HF `tokenizers` reads it the same way: tests/tokenizer/real_vocab_check.py.)
#include <gtest/gtest.h>

#include <filesystem>

#include "common/testing.h"
#include "dsa/tokenizer/tiny_tokenizer.h"
#include "dsa/tokenizer/tokenizer.h"

namespace dsa {
namespace {

TEST(TinyTokenizer, SpecialTokensExtrasAndRoundTrip) {
  if (!tokenizer_available()) GTEST_SKIP() << "dsa was built without PCRE2: no tokenizer";
  const auto dir = std::filesystem::temp_directory_path() / ("dsa_tiny_tok_" + std::to_string(test::test_seed()));
  std::filesystem::create_directories(dir);
  for (const std::string arch : {"glm_moe_dsa", "deepseek_v4"}) {
    const TinyTokenizer t = make_tiny_tokenizer(arch, 512, {"get_weather", "Let me check."});
    write_tiny_tokenizer(t, dir.string());
    auto tok = Tokenizer::load(dir.string());
    EXPECT_EQ(tok->vocab_size(), 512) << "every id of the model decodes";
    EXPECT_GT(tok->encode(std::string("the weather ") + std::string(40, 'a')).size(), 0u);
    EXPECT_EQ(tok->decode({510, 511}, true), "");
    EXPECT_EQ(tok->bos_id(), 0);
    EXPECT_EQ(tok->eos_id(), 1);
    const bool glm = arch == "glm_moe_dsa";
    for (const char* s : glm ? std::vector<const char*>{"[gMASK]", "<|user|>", "<|assistant|>", "<think>", "</think>",
                                                       "<tool_call>", "<arg_key>", "<|observation|>"}
                             : std::vector<const char*>{"<｜User｜>", "<｜Assistant｜>", "<think>", "</think>", "｜DSML｜"}) {
      const int32_t id = tok->token_id(s);
      EXPECT_GE(id, 0) << s;
      EXPECT_TRUE(tok->is_special(id)) << s;
      EXPECT_EQ(tok->encode(s), std::vector<int32_t>{id}) << s;
    }
    EXPECT_EQ(tok->encode("get_weather").size(), 1u);
    EXPECT_EQ(tok->encode("Let me check.").size(), 1u);
    EXPECT_EQ(t.stop_ids, glm ? std::vector<int32_t>({1, tok->token_id("<|user|>"), tok->token_id("<|observation|>")})
                              : std::vector<int32_t>{1});
    const std::string text = "The weather in Paris is sunny, 23 degrees! <think>why?</think> naïve 日本";
    EXPECT_EQ(tok->decode(tok->encode(text)), text);
    EXPECT_LT(tok->encode("The weather in Paris").size(), 8u) << "common words are whole tokens";
  }
  std::filesystem::remove_all(dir);
  EXPECT_NE(test::error_of([] { make_tiny_tokenizer("glm_moe_dsa", 200); }).find("cannot hold"), std::string::npos);
  EXPECT_NE(test::error_of([] { make_tiny_tokenizer("llama", 512); }).find("no tokenizer for arch 'llama'"), std::string::npos);
}

}  // namespace
}  // namespace dsa
