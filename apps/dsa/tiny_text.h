// Text files of `dsa make-tiny` checkpoints, so that every tiny model can be served with text
// and chat:
//  - --tokenizer FILE: that tokenizer.json (with the tokenizer_config.json and
//    chat_template.jinja beside it, when there; GLM gets dsa's GLM-5 template when none is) is
//    copied, and the model's vocabulary is sized to it (tiny_vocab_size);
//  - otherwise dsa's own small byte-level BPE tokenizer (tokenizer/tiny_tokenizer.h) with the
//    model family's special tokens, and for GLM dsa's GLM-5 chat template (chat_template.jinja);
//  - generation_config.json (and config.json's bos/eos ids) with the tokens that end a turn;
//  - --script FILE (a JSON list of strings: a reply, piece by piece, starting with the token the
//    prompt ends with, e.g. "<think>"): scripted weights (model/scripted_weights.h) that make the
//    model produce it. With dsa's tokenizer every piece becomes one token; with a given tokenizer
//    the pieces are encoded and each token must have one successor.
#pragma once
#include <cstdint>
#include <string>

namespace dsa::cli {

struct TinyTextOptions {
  std::string arch;
  std::string tokenizer;  // "" = dsa's own
  std::string script;     // "" = random weights
  bool script_mtp = false;  // with script: the MTP layer predicts the script too (model/scripted_weights.h)
  bool write_tokenizer = true;
};

// The vocabulary the checkpoint must have (0: keep the preset's).
int64_t tiny_vocab_size(const TinyTextOptions& o);

// After make_tiny_checkpoint wrote `dir` (model vocabulary `vocab`).
void write_tiny_text_files(const TinyTextOptions& o, const std::string& dir, int64_t vocab);

}  // namespace dsa::cli
