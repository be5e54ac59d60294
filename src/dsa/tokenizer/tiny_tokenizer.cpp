#include "dsa/tokenizer/tiny_tokenizer.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include "dsa/core/error.h"
#include "dsa/tokenizer/byte_level.h"

namespace dsa {
namespace {

using ojson = nlohmann::ordered_json;

// The text the merges are learned from: plain English of the kind chats have, a little code and
// numbers (dsa's own words; any text would do, this one keeps common words whole).
const char* const kCorpus =
    "The user asks a question and the assistant answers it. The assistant thinks about the question "
    "first, then it writes the answer. When the answer needs a tool, the assistant calls the tool with "
    "its arguments and waits for the result. The weather in Paris is sunny today, and the weather in "
    "Tokyo is rainy. What is the weather like in the city where you live? Please tell me the time. "
    "Hello! How are you? I am fine, thank you. Let me check that for you. Sure, here is the result. "
    "One, two, three, four, five, six, seven, eight, nine, ten. 1 2 3 4 5 6 7 8 9 10 100 2024 3.14 "
    "def add(a, b):\n    return a + b\n\nfor i in range(10):\n    print(i)\n"
    "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"unit\": \"celsius\"}}\n"
    "A small model can still serve text. This is a test of the tokenizer, the server and the chat. "
    "The quick brown fox jumps over the lazy dog. She sells sea shells by the sea shore. "
    "It is what it is, and that is that. We will see what happens next; it should work well. "
    "Thinking step by step: first read the question, then find the facts, then write the reply.\n";

std::vector<std::string> specials_of(const std::string& arch) {
  if (arch == "deepseek_v4")
    return {"<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>", "<｜▁pad▁｜>", "<｜User｜>", "<｜Assistant｜>", "<think>",
            "</think>", "<｜latest_reminder｜>", "｜DSML｜", "<｜action｜>", "<｜query｜>"};
  if (arch == "glm_moe_dsa")
    return {"[gMASK]",     "<|endoftext|>", "<sop>",        "<|system|>",  "<|user|>",   "<|assistant|>",
            "<|observation|>", "<think>",   "</think>",     "<tool_call>", "</tool_call>", "<arg_key>",
            "</arg_key>",  "<arg_value>",   "</arg_value>", "<tool_response>", "</tool_response>", "[MASK]"};
  fail("make-tiny: no tokenizer for arch '{}' (deepseek_v4 or glm_moe_dsa)", arch);
}

// Words as GPT-2's pattern splits plain ASCII text: an optional space, then a run of letters,
// of digits or of other symbols; whitespace runs alone.
std::vector<std::string> words(const std::string& text) {
  std::vector<std::string> out;
  auto kind = [](char c) {
    if (std::isalpha(static_cast<unsigned char>(c))) return 0;
    if (std::isdigit(static_cast<unsigned char>(c))) return 1;
    if (std::isspace(static_cast<unsigned char>(c))) return 2;
    return 3;
  };
  size_t i = 0;
  while (i < text.size()) {
    size_t j = i;
    if (text[j] == ' ' && j + 1 < text.size() && kind(text[j + 1]) != 2) ++j;
    const int k = kind(text[j]);
    size_t e = j + 1;
    while (e < text.size() && kind(text[e]) == k) ++e;
    out.push_back(text.substr(i, e - i));
    i = e;
  }
  return out;
}

// Splits a stand-in string into its characters (each one UTF-8 sequence).
std::vector<std::string> chars(const std::string& s) {
  std::vector<std::string> out;
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    const size_t n = c < 0x80 ? 1 : (c < 0xE0 ? 2 : (c < 0xF0 ? 3 : 4));
    out.push_back(s.substr(i, n));
    i += n;
  }
  return out;
}

}  // namespace

TinyTokenizer make_tiny_tokenizer(const std::string& arch, int64_t vocab, const std::vector<std::string>& extra_tokens,
                                  const std::string& extra_text) {
  const std::vector<std::string> specials = specials_of(arch);
  std::vector<std::string> extras;
  for (const std::string& e : extra_tokens) {
    DSA_CHECK(!e.empty(), "make-tiny: an extra token is empty");
    if (std::find(specials.begin(), specials.end(), e) == specials.end() && std::find(extras.begin(), extras.end(), e) == extras.end())
      extras.push_back(e);
  }
  const int64_t fixed = static_cast<int64_t>(specials.size() + extras.size()) + 256;
  DSA_CHECK(vocab >= fixed, "make-tiny: a vocabulary of {} ids cannot hold {} special and extra tokens and 256 bytes", vocab,
            fixed - 256);

  ojson added = ojson::array();
  int32_t id = 0;
  for (const std::string& s : specials)
    added.push_back({{"id", id++}, {"content", s}, {"single_word", false}, {"lstrip", false}, {"rstrip", false},
                     {"normalized", false}, {"special", true}});
  // Extras are matched with the special tokens (normalized false), leftmost-longest, so a piece
  // that contains a special token's text stays whole.
  for (const std::string& s : extras)
    added.push_back({{"id", id++}, {"content", s}, {"single_word", false}, {"lstrip", false}, {"rstrip", false},
                     {"normalized", false}, {"special", false}});

  // Added tokens are in the model vocabulary too (as in real checkpoints: `tokenizers` keeps
  // the ids of added tokens only when the vocabulary has them), and no merge may rebuild one.
  ojson vocab_json = ojson::object();
  std::set<std::string> known;
  for (const auto& a : added) {
    vocab_json[a["content"].get<std::string>()] = a["id"];
    known.insert(a["content"].get<std::string>());
  }
  for (int b = 0; b < 256; ++b) {
    const std::string& c = tok::byte_to_char(static_cast<uint8_t>(b));
    vocab_json[c] = id++;
    known.insert(c);
  }
  std::map<std::vector<std::string>, int64_t> counts;
  for (const std::string& w : words(std::string(kCorpus) + extra_text)) ++counts[chars(tok::bytes_to_chars(w))];
  ojson merges = ojson::array();
  while (id < vocab) {
    std::map<std::pair<std::string, std::string>, int64_t> pairs;
    for (const auto& [w, n] : counts)
      for (size_t i = 0; i + 1 < w.size(); ++i) pairs[{w[i], w[i + 1]}] += n;
    const std::pair<std::string, std::string>* best = nullptr;
    int64_t best_n = 1;  // a pair must occur twice to be worth a token
    for (const auto& [p, n] : pairs)
      if (n > best_n && !known.count(p.first + p.second)) {  // std::map order: ties go to the smaller pair
        best = &p;
        best_n = n;
      }
    if (!best) break;
    const std::string a = best->first, b = best->second, ab = a + b;
    merges.push_back({a, b});
    vocab_json[ab] = id++;
    known.insert(ab);
    std::map<std::vector<std::string>, int64_t> next;
    for (const auto& [w, n] : counts) {
      std::vector<std::string> m;
      for (size_t i = 0; i < w.size(); ++i) {
        if (i + 1 < w.size() && w[i] == a && w[i + 1] == b) {
          m.push_back(ab);
          ++i;
        } else {
          m.push_back(w[i]);
        }
      }
      next[m] += n;
    }
    counts = std::move(next);
  }

  // The rest of the model's ids are reserved special tokens (as real vocabularies have place
  // holders), so that every id a model can emit decodes.
  for (int k = 0; id < vocab; ++k) {
    const std::string r = arch == "deepseek_v4" ? "<｜place▁holder▁no▁" + std::to_string(k) + "｜>" : "<|reserved_" + std::to_string(k) + "|>";
    added.push_back({{"id", id}, {"content", r}, {"single_word", false}, {"lstrip", false}, {"rstrip", false},
                     {"normalized", false}, {"special", true}});
    vocab_json[r] = id++;
  }

  TinyTokenizer t;
  const ojson byte_level = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}, {"use_regex", true}};
  t.tokenizer_json = {{"version", "1.0"},
                      {"truncation", nullptr},
                      {"padding", nullptr},
                      {"added_tokens", added},
                      {"normalizer", nullptr},
                      {"pre_tokenizer", byte_level},
                      {"post_processor", byte_level},
                      {"decoder", byte_level},
                      {"model",
                       {{"type", "BPE"},
                        {"dropout", nullptr},
                        {"unk_token", nullptr},
                        {"continuing_subword_prefix", nullptr},
                        {"end_of_word_suffix", nullptr},
                        {"fuse_unk", false},
                        {"byte_fallback", false},
                        {"ignore_merges", false},
                        {"vocab", vocab_json},
                        {"merges", merges}}}};
  const bool v4 = arch == "deepseek_v4";
  t.bos_id = 0;
  t.eos_id = 1;
  if (v4) {
    t.stop_ids = {1};
  } else {  // GLM ends a turn with <|endoftext|>, or by starting the next one
    auto idx = [&](const char* s) { return static_cast<int32_t>(std::find(specials.begin(), specials.end(), s) - specials.begin()); };
    t.stop_ids = {idx("<|endoftext|>"), idx("<|user|>"), idx("<|observation|>")};
  }
  t.tokenizer_config = {{"add_bos_token", false},
                        {"add_eos_token", false},
                        {"bos_token", specials[0]},
                        {"eos_token", specials[1]},
                        {"pad_token", v4 ? specials[2] : specials[1]},
                        {"clean_up_tokenization_spaces", false},
                        {"model_max_length", v4 ? 65536 : 4096},
                        {"tokenizer_class", "PreTrainedTokenizerFast"}};
  return t;
}

void write_tiny_tokenizer(const TinyTokenizer& t, const std::string& dir) {
  for (const auto& [name, j] : {std::pair<const char*, const ojson*>{"tokenizer.json", &t.tokenizer_json},
                                {"tokenizer_config.json", &t.tokenizer_config}}) {
    const auto path = std::filesystem::path(dir) / name;
    std::ofstream f(path);
    DSA_CHECK(f, "{}: cannot create", path.string());
    f << j->dump(2) << "\n";
    DSA_CHECK(f.good(), "{}: write failed", path.string());
  }
}

}  // namespace dsa
