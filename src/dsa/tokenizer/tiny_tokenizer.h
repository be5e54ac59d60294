// A small byte-level BPE tokenizer for tiny checkpoints (`dsa make-tiny`), so that every tiny
// model can be served with text and chat: tokenizer.json in the Hugging Face format (ByteLevel
// pre-tokenizer with GPT-2's split pattern, BPE, ByteLevel decoder) and tokenizer_config.json
// (bos/eos tokens, no automatic BOS: chat prompts spell it out).
//  - ids 0.. are the model family's special tokens (DeepSeek-V4: <｜begin▁of▁sentence｜> 0,
//    <｜end▁of▁sentence｜> 1, <｜User｜>, <｜Assistant｜>, <think>, </think>, ｜DSML｜, ...;
//    GLM-5: [gMASK] 0, <|endoftext|> 1, <sop>, <|system|>, <|user|>, <|assistant|>,
//    <|observation|>, <think>, </think>, <tool_call>, <arg_key>, ...), matching the tiny configs'
//    bos_token_id 0 / eos_token_id 1;
//  - then `extra_tokens` (whole pieces of text a test wants as single tokens), then the 256
//    byte tokens, then merges learned from a small built-in English text (the most frequent
//    pair first, ties broken by the pair's text, so the result is deterministic), plus
//    `extra_text` (e.g. the family's tool-use prompt, so that prompts stay short), until the
//    model's vocabulary is full or no pair repeats; the ids left are reserved special tokens, so
//    that every id the model can emit decodes.
// stop_ids: the ids that end an assistant turn (the eos_token_id list of generation_config.json).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace dsa {

struct TinyTokenizer {
  nlohmann::ordered_json tokenizer_json, tokenizer_config;
  int32_t bos_id = 0, eos_id = 1;
  std::vector<int32_t> stop_ids;
};

// arch: "deepseek_v4" or "glm_moe_dsa"; vocab: the model's vocabulary size (ids in [0, vocab)).
TinyTokenizer make_tiny_tokenizer(const std::string& arch, int64_t vocab, const std::vector<std::string>& extra_tokens = {},
                                  const std::string& extra_text = "");

// Writes tokenizer.json and tokenizer_config.json into dir.
void write_tiny_tokenizer(const TinyTokenizer& t, const std::string& dir);

}  // namespace dsa
